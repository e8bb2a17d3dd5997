#!/usr/bin/env bash
# A node that fails before its workers start (issue 38): the job's exit
# status is that first failure's on every node, as under torchrun and
# mpirun, not 2 on the nodes it told.  Two namespace nodes: n1's command
# is missing (127), standalone with the static rendezvous and c10d, and
# per node under real mpirun.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
multinode_setup 2
d=$TEST_TMP/fs
mkdir -p "$d"
# both ARGS...: amlrun on n0 (command true) and n1 (a missing command),
# the same ARGS; statuses in $d/rc.0, $d/rc.1, stderr in $d/err.*
both() {
    on n0 $T "$AMLRUN" "$@" --nproc-per-node 2 --no-python true 2>"$d/err.0" &
    local p0=$!
    on n1 $T "$AMLRUN" "$@" --nproc-per-node 2 --no-python ./no-such-script 2>"$d/err.1"
    echo $? >"$d/rc.1"
    wait "$p0"
    echo $? >"$d/rc.0"
}

# Static: the node rank differs, one call each.
on n0 $T "$AMLRUN" --nnodes 2 --node-rank 0 --master-addr n0 --master-port "$PORT" \
    --nproc-per-node 2 --no-python true 2>"$d/err.0" &
p0=$!
on n1 $T "$AMLRUN" --nnodes 2 --node-rank 1 --master-addr n0 --master-port "$PORT" \
    --nproc-per-node 2 --no-python ./no-such-script 2>"$d/err.1"
echo $? >"$d/rc.1"
wait "$p0"
echo $? >"$d/rc.0"
PORT=$((PORT + 1))
expect_eq "static: n1 exits 127 and n0, told, exits 127 too" "$(cat "$d/rc.1" "$d/rc.0" | tr '\n' ' ')" "127 127 "
check "static: n0 names n1's reason" grep -q "node 1 (10.231.0.11) could not start, exit status 127: ./no-such-script" "$d/err.0"

both --nnodes 2 --rdzv-backend c10d --rdzv-endpoint "n0:$PORT"
PORT=$((PORT + 1))
expect_eq "c10d: n1 exits 127 and n0, told, exits 127 too" "$(cat "$d/rc.1" "$d/rc.0" | tr '\n' ' ')" "127 127 "

# Per node under mpirun: n1's amlrun cannot find its command; each
# amlrun's own status is printed (mpirun lets each end on its own).
# shellcheck disable=SC2016
out=$(on n0 $T $MPIRUN --mca orte_abort_on_non_zero_status 0 --host n0,n1 --npernode 1 \
      --bind-to none sh -c 'c=true; [ "$(hostname)" = n1 ] && c=./no-such-script
      "$0" --nproc-per-node 2 --no-python "$c"; echo "$(hostname) rc=$?"' "$AMLRUN" 2>&1)
expect_eq "mpirun per node: both amlruns exit 127, n0's told by n1" \
    "$(grep -E '^n[01] rc=' <<<"$out" | sort | tr '\n' ' ')" "n0 rc=127 n1 rc=127 "
check "mpirun per node: n0's amlrun names n1's reason" grep -q "node 1 (.*) could not start, exit status 127" <<<"$out"

expect_eq "no process left on any node" "$(leftovers)" ""
