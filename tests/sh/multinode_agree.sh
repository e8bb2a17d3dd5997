#!/usr/bin/env bash
# Nodes whose amlruns would start different numbers of workers (issue 10):
# every node computes its workers' RANK as its own rank * nproc + i, so such
# a job's ranks overlap (node 0 with 1 worker, node 1 with 2 gave 0/2, 2/4,
# 3/4 and a gloo job that hung).  Before any worker starts, the amlruns check
# with each other: every node refuses, naming both counts, and nothing runs.
. "$(dirname "$0")/../lib.sh"
. "$TOP/tests/multinode.sh"
multinode_setup 2

# A worker that leaves a mark, so that "nothing started" can be checked.
MARK=$TEST_TMP/marks
mkdir -p "$MARK"
printf '#!/bin/sh\ntouch "%s/$(hostname).$RANK"\n' "$MARK" >"$TEST_TMP/mark.sh"
chmod +x "$TEST_TMP/mark.sh"
no_marks() { [ -z "$(ls -A "$MARK")" ]; }

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

# Standalone, the same --nnodes/--node-rank on each node, 1 and 2 workers.
start=$(date +%s%N)
standalone "$TEST_TMP/a" "$PORT" 1 2
ms=$(( ($(date +%s%N) - start) / 1000000 ))
expect_eq "1 and 2 workers: node 0 refuses (2)" "$rc0" 2
expect_eq "1 and 2 workers: node 1 refuses (2)" "$rc1" 2
check "1 and 2 workers: no worker started on either node" no_marks
check "1 and 2 workers: node 1 names both counts" \
    grep -q 'workers per node: rank 1 has 2, rank 0 has 1; no worker started' "$TEST_TMP/a1"
check "1 and 2 workers: node 0 is told which node and why" \
    grep -q 'rank 1 failed: workers per node: rank 1 has 2, rank 0 has 1' "$TEST_TMP/a0"
check "1 and 2 workers: refused at once, not at a timeout (${ms} ms)" test "$ms" -lt 20000

# The same, started by mpirun per node: the count differs by host (as
# --nproc-per-node gpu would on nodes with different GPUs); mpirun's
# status is the refusal's.
PORT2=$((PORT + 2))
cat >"$TEST_TMP/pernode.sh" <<EOF2
#!/bin/sh
n=2; [ "\$(hostname)" = n0 ] && n=1
exec "$AMLRUN" --master-port $PORT2 --nproc-per-node \$n "$TEST_TMP/mark.sh"
EOF2
chmod +x "$TEST_TMP/pernode.sh"
rc=0
on n0 $T $MPIRUN --host n0,n1 --npernode 1 "$TEST_TMP/pernode.sh" >"$TEST_TMP/m" 2>&1 || rc=$?
expect_eq "mpirun per node, 1 and 2 workers: the job fails with 2" "$rc" 2
check "mpirun per node: no worker started" no_marks
check "mpirun per node: the counts are named" grep -q 'workers per node: rank 1 has 2, rank 0 has 1' "$TEST_TMP/m"

# Equal counts still run, and -v says the check was made.
standalone "$TEST_TMP/e" $((PORT + 4)) 2 2 -v
expect_eq "2 and 2 workers: both run" "$rc0 $rc1" "0 0"
expect_eq "2 and 2 workers: every rank ran once" "$(ls "$MARK" | sort | tr '\n' ' ')" \
    "n0.0 n0.1 n1.2 n1.3 "
check "2 and 2 workers: -v says the counts were checked" grep -q 'checking with the other 1 amlruns' "$TEST_TMP/e0"
# Side by side: real torchrun on the same two nodes, 1 and 2 workers.  Its
# agents exchange their counts through the store and number the ranks
# 0..2; amlrun refuses (above) until its agents can do the same, rather
# than start ranks that overlap.
if "$TORCH_PY" -c 'import torch.distributed.run' 2>/dev/null; then
    TR="$TORCH_PY $TOP/bench/torchrun-wrapper.py --nnodes 2 --master_addr n0 --master_port $((PORT + 6))"
    printf '#!/bin/sh\necho "$(hostname) $RANK/$WORLD_SIZE local $LOCAL_RANK/$LOCAL_WORLD_SIZE"\n' >"$TEST_TMP/tr.sh"
    chmod +x "$TEST_TMP/tr.sh"
    on n0 $T $TR --node_rank 0 --nproc_per_node 1 --no_python "$TEST_TMP/tr.sh" >"$TEST_TMP/t0" 2>&1 &
    p0=$!
    on n1 $T $TR --node_rank 1 --nproc_per_node 2 --no_python "$TEST_TMP/tr.sh" >"$TEST_TMP/t1" 2>&1 &
    p1=$!
    wait $p0 $p1
    expect_eq "torchrun, 1 and 2 workers: ranks 0..2 of 3 (what amlrun refuses to get wrong)" \
        "$(cat "$TEST_TMP/t0" "$TEST_TMP/t1" | grep -E '^n[01] ' | sort -t' ' -k2)" \
        "$(printf 'n0 0/3 local 0/1\nn1 1/3 local 0/2\nn1 2/3 local 1/2')"
else
    skip "torchrun side by side" "$TORCH_PY cannot import torch.distributed.run"
fi
expect_eq "nothing left on any node" "$(leftover_procs)" ""
