#!/usr/bin/env bash
# Nodes whose amlruns start different numbers of workers.  Numbering each
# node's workers from its own rank (rank * nproc + i) would give ranks that
# overlap (node 0 with 1 worker, node 1 with 2 gave 0/2, 2/4, 3/4 and a gloo
# job that hung).  The agents meet on the control plane (amldist_rdzv(3)),
# learn every node's count and number the ranks as torchrun does: node k's
# follow those of nodes 0..k-1.  Where several amlruns share a node (mpirun
# with two per node) the ranks are numbered per amlrun, so the counts must
# be equal: every amlrun refuses, naming them, and nothing runs.
# amldist-test: slow (one of the longest: tests/run.sh starts it early)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
multinode_setup 2

# A worker that leaves a mark "host.RANK.WORLD_SIZE.LOCAL_RANK.LOCAL_WORLD_SIZE",
# so that what ran, and with which numbers, can be checked.
MARK=$TEST_TMP/marks
mkdir -p "$MARK"
printf '#!/bin/sh\ntouch "%s/$(hostname).$RANK.$WORLD_SIZE.$LOCAL_RANK.$LOCAL_WORLD_SIZE"\n' "$MARK" >"$TEST_TMP/mark.sh"
chmod +x "$TEST_TMP/mark.sh"
no_marks() { [ -z "$(ls -A "$MARK")" ]; }
marks() { ls "$MARK" | sort -t. -k2,2n | tr '\n' ' '; rm -f "$MARK"/*; }

# standalone OUT PORT NPROC0 NPROC1 [ARGS0]: amlrun as node 0 on n0 (with
# ARGS0) and node 1 on n1, started together; output in OUT0, OUT1, their
# statuses in rc0, rc1.
standalone() {
    local out=$1 port=$2 n0=$3 n1=$4 p0 p1
    on n0 $T "$AMLRUN" ${5-} --nnodes 2 --node-rank 0 --master-addr n0 --master-port "$port" \
        --nproc-per-node "$n0" "$TEST_TMP/mark.sh" >"${out}0" 2>&1 &
    p0=$!
    on n1 $T "$AMLRUN" --nnodes 2 --node-rank 1 --master-addr n0 --master-port "$port" \
        --nproc-per-node "$n1" "$TEST_TMP/mark.sh" >"${out}1" 2>&1 &
    p1=$!
    rc0=0; wait $p0 || rc0=$?
    rc1=0; wait $p1 || rc1=$?
}

# Standalone, the same --nnodes/--node-rank on each node, 1 and 2 workers:
# torchrun's numbers, 0/3 on n0, 1/3 and 2/3 on n1.
standalone "$TEST_TMP/a" "$PORT" 1 2
expect_eq "1 and 2 workers: both nodes succeed" "$rc0 $rc1" "0 0"
expect_eq "1 and 2 workers: ranks 0..2 of 3, numbered as torchrun does" "$(marks)" \
    "n0.0.3.0.1 n1.1.3.0.2 n1.2.3.1.2 "

# The same, started by mpirun per node: the count differs by host (as
# --nproc-per-node gpu would on nodes with different GPUs).
PORT2=$((PORT + 10))
cat >"$TEST_TMP/pernode.sh" <<EOF2
#!/bin/sh
n=2; [ "\$(hostname)" = n0 ] && n=1
exec "$AMLRUN" --master-port $PORT2 --nproc-per-node \$n "$TEST_TMP/mark.sh"
EOF2
chmod +x "$TEST_TMP/pernode.sh"
rc=0
on n0 $T $MPIRUN --host n0,n1 --npernode 1 "$TEST_TMP/pernode.sh" >"$TEST_TMP/m" 2>&1 || rc=$?
expect_eq "mpirun per node, 1 and 2 workers: the job succeeds" "$rc" 0
expect_eq "mpirun per node, 1 and 2 workers: ranks 0..2 of 3" "$(marks)" \
    "n0.0.3.0.1 n1.1.3.0.2 n1.2.3.1.2 "

# Two amlruns on each node under mpirun, 1 and 2 workers: numbered per
# amlrun, so refused on every amlrun, naming the counts; nothing runs.
PORT3=$((PORT + 20))
cat >"$TEST_TMP/shared.sh" <<EOF2
#!/bin/sh
n=1; [ "\$OMPI_COMM_WORLD_LOCAL_RANK" = 1 ] && n=2
exec "$AMLRUN" --master-port $PORT3 --nproc-per-node \$n "$TEST_TMP/mark.sh"
EOF2
chmod +x "$TEST_TMP/shared.sh"
rc=0
on n0 $T $MPIRUN --oversubscribe --host n0:2,n1:2 --npernode 2 "$TEST_TMP/shared.sh" >"$TEST_TMP/s" 2>&1 || rc=$?
expect_eq "two amlruns per node, 1 and 2 workers: the job fails with 2" "$rc" 2
check "two amlruns per node: no worker started" no_marks
check "two amlruns per node: the counts are named" grep -q 'different numbers of workers (node 1: 2, this one: 1)' "$TEST_TMP/s"

# Equal counts run, and -v names the rendezvous.
standalone "$TEST_TMP/e" $((PORT + 30)) 2 2 -v
expect_eq "2 and 2 workers: both run" "$rc0 $rc1" "0 0"
expect_eq "2 and 2 workers: every rank ran once" "$(marks)" \
    "n0.0.4.0.2 n0.1.4.1.2 n1.2.4.0.2 n1.3.4.1.2 "
check "2 and 2 workers: -v names the rendezvous" grep -q 'rendezvous n0:.*round 0: node 0 of 2 (workers per node: 2,2); this node hosts it' "$TEST_TMP/e0"
# Side by side: real torchrun on the same two nodes, 1 and 2 workers, gives
# the numbers amlrun gave above.
if have_torch torch.distributed.run; then
    TR="$TORCH_PY $TOP/bench/torchrun-wrapper.py --nnodes 2 --master_addr n0 --master_port $((PORT + 40))"
    printf '#!/bin/sh\necho "$(hostname) $RANK/$WORLD_SIZE local $LOCAL_RANK/$LOCAL_WORLD_SIZE"\n' >"$TEST_TMP/tr.sh"
    chmod +x "$TEST_TMP/tr.sh"
    on n0 $T $TR --node_rank 0 --nproc_per_node 1 --no_python "$TEST_TMP/tr.sh" >"$TEST_TMP/t0" 2>&1 &
    p0=$!
    on n1 $T $TR --node_rank 1 --nproc_per_node 2 --no_python "$TEST_TMP/tr.sh" >"$TEST_TMP/t1" 2>&1 &
    p1=$!
    wait $p0 $p1
    expect_eq "torchrun, 1 and 2 workers: ranks 0..2 of 3, as amlrun's" \
        "$(cat "$TEST_TMP/t0" "$TEST_TMP/t1" | grep -E '^n[01] ' | sort -t' ' -k2)" \
        "$(printf 'n0 0/3 local 0/1\nn1 1/3 local 0/2\nn1 2/3 local 1/2')"
else
    skip "torchrun side by side" "$TORCH_PY cannot import torch.distributed.run"
fi
expect_eq "nothing left on any node" "$(leftovers)" ""
