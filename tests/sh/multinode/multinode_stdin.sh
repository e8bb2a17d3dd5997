#!/usr/bin/env bash
# --stdin RANK in a job of two nodes (issue 38): each node's amlrun gives
# its own stdin to the rank it names, so a rank of another node reads that
# node's stdin, and the node without it says where its stdin goes; a rank
# that is no rank of the job (4 of 4) is refused on every node before any
# worker starts (exit 2), never accepted silently.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
multinode_setup 2
d=$TEST_TMP/in
mkdir -p "$d"
# pair RANK: amlrun on each node, node i's stdin "from nI", each worker
# writing what it read to $d/in.$RANK; statuses in $d/rc.I
pair() {
    rm -f "$d"/*
    for i in 0 1; do
        # shellcheck disable=SC2016
        (printf 'from n%s\n' "$i" | on n$i $T "$AMLRUN" --nnodes 2 --node-rank $i --master-addr n0 \
            --master-port "$PORT" --nproc-per-node 2 --stdin "$1" --no-python \
            sh -c 'cat >"$0/in.$RANK"' "$d" 2>"$d/err.$i"; echo $? >"$d/rc.$i") &
    done
    wait
    PORT=$((PORT + 1))
}

pair 3
expect_eq "--stdin 3: both nodes exit 0" "$(cat "$d/rc.0" "$d/rc.1" | tr '\n' ' ')" "0 0 "
expect_eq "--stdin 3: rank 3 on n1 reads n1's stdin, no other rank reads any" \
    "$(for r in 0 1 2 3; do printf '%s:%s;' "$r" "$(cat "$d/in.$r" 2>/dev/null)"; done)" "0:;1:;2:;3:from n1;"
check "--stdin 3: n0 says where its stdin goes" \
    grep -q "^amlrun: note: --stdin 3: rank 3 runs on another node (this node runs ranks 0 to 1), whose amlrun gives it that node's stdin; this node's stdin goes to no worker" "$d/err.0"
check "--stdin 3: n1, which runs rank 3, says nothing of it" sh -c '! grep -q -- "--stdin" "$0"' "$d/err.1"

pair 4
expect_eq "--stdin 4 of 4 ranks: both nodes refuse (2)" "$(cat "$d/rc.0" "$d/rc.1" | tr '\n' ' ')" "2 2 "
expect_eq "--stdin 4: each node says why, naming the ranks" \
    "$(grep -h -c "^amlrun: --stdin 4: no such rank: this job has 4 ranks (0 to 3); no worker started" "$d/err.0" "$d/err.1" | tr '\n' ' ')" "1 1 "
expect_eq "--stdin 4: no worker started" "$(ls "$d" | grep -c '^in\.')" 0

expect_eq "no process left on any node" "$(leftovers)" ""
