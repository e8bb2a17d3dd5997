#!/usr/bin/env bash
# --hang-timeout across nodes (the control plane's host decides from every
# node's view): a real PyTorch DDP job (gloo) on 2 nodes of the namespace
# cluster, rank 3 (node 1) stuck in a Python function while the others
# wait for it in all_reduce.  The report is printed once, on node 0 (the
# host's node), names rank 3 with its host, pid and file:line, and the
# others' group; --hang-report has rank 3 as the outlier; every node exits
# 124.  Then the same with node 1's clock an hour ahead
# (AMLDIST_TEST_CLOCK_SHIFT_MS): the same report; node 1's lines taken at
# its clock's word would look an hour fresh and no hang would ever be found
# (the per-rank direction, a clock behind, is test_rdzv's
# test_plane_hang_across_nodes).  The two jobs run side by side; the
# second takes the same steps without PyTorch (RING_DIR: tests/amlrun/
# ring.py's all_reduce over Unix sockets in place of gloo's), since what it
# varies is the clock, not the collective.
# amldist-test: slow
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
if ! have_torch torch.distributed; then
    skip "multi-node hang" "$TORCH_PY cannot import torch"
    exit 0
fi
MULTINODE_TIMEOUT=180
multinode_setup 2

HANG=$TOP/tests/amlrun/ddp_hang.py
LINE=$(grep -n 'time.sleep(0.05)' "$HANG" | cut -d: -f1)
SEC=20
export STUCK_RANK=3 STUCK_STEP=3 OMP_NUM_THREADS=1

# start TAG [ENV-FOR-NODE-1...]: both nodes, their stderr in
# $TEST_TMP/TAG.{0,1}; finish TAG waits for both.  The two jobs below run
# side by side, on ports of their own: each waits out its $SEC s alone.
declare -A pid0 pid1
RING=()  # RING_DIR=... for a job without PyTorch
start() {
    local tag=$1
    shift
    on n0 $T env STUCK_RANK=3 "${RING[@]}" "$AMLRUN" --hang-timeout $SEC --hang-report "$TEST_TMP/$tag.json" \
        --nnodes 2 --node-rank 0 --master-addr n0 --master-port "$PORT" \
        --nproc-per-node 2 --python "$TORCH_PY" "$HANG" >"$TEST_TMP/$tag.out0" 2>"$TEST_TMP/$tag.0" &
    pid0[$tag]=$!
    on n1 $T env STUCK_RANK=3 "${RING[@]}" "$@" "$AMLRUN" --hang-timeout $SEC --nnodes 2 --node-rank 1 \
        --master-addr n0 --master-port "$PORT" --nproc-per-node 2 \
        --python "$TORCH_PY" "$HANG" >"$TEST_TMP/$tag.out1" 2>"$TEST_TMP/$tag.1" &
    pid1[$tag]=$!
    PORT=$((PORT + 7))
}
finish() {
    local tag=$1
    wait "${pid1[$tag]}"
    echo $? >"$TEST_TMP/$tag.rc1"
    wait "${pid0[$tag]}"
    echo $? >"$TEST_TMP/$tag.rc0"
}

# check TAG NAME
check_report() {
    local tag=$1 name=$2 e0=$TEST_TMP/$1.0 e1=$TEST_TMP/$1.1
    expect_eq "$name: node 0 exits 124" "$(cat "$TEST_TMP/$tag.rc0")" 124
    expect_eq "$name: node 1 exits 124" "$(cat "$TEST_TMP/$tag.rc1")" 124
    check "$name: node 0 says the host found the hang" \
        grep -q "^amlrun: hang: no rank of any node showed progress for $SEC s" "$e0"
    check "$name: the report names rank 3 on n1 with its pid and line" \
        grep -Eq "^amlrun:   rank 3 \(host n1, pid [0-9]+\): ddp_hang\.py:$LINE stuck_in_python" "$e0"
    check "$name: the others' group waits in all_reduce" \
        grep -Eq "^amlrun:   ranks 0-2 \(3\): .*all_reduce" "$e0"
    check "$name: the report is printed once, on node 0" \
        sh -c "! grep -q 'stuck_in_python' '$e1' && [ \$(grep -c 'stuck_in_python' '$e0') = 1 ]"
    check "$name: --hang-report names rank 3 the outlier" \
        python3 -c "import json,sys; r=json.load(open(sys.argv[1])); \
sys.exit(0 if r['outliers']==[3] and r['reason']=='hang' and len(r['ranks'])==4 else 1)" "$TEST_TMP/$tag.json"
    check "$name: node 1 is stopped by the host's node" grep -q "hang" "$e1"
    if [ -n "${VERBOSE:-}" ]; then diag "$(cat "$e0" "$e1")"; fi
}

begin=$(date +%s.%N)
start plain
mkdir -p "$TEST_TMP/ring"
RING=(RING_DIR="$TEST_TMP/ring")
start shifted AMLDIST_TEST_CLOCK_SHIFT_MS=3600000
RING=()
finish plain
check_report plain "DDP hang across nodes"

finish shifted
check_report shifted "node 1's clock an hour ahead"
# Not before SEC after the last line of any rank: the job's steps came
# first.
last=$(grep -q 'step 2 rank 3' "$TEST_TMP/shifted.out1" && echo yes)
expect_eq "node 1's clock an hour ahead: rank 3 printed its first steps" "$last" yes
check "node 1's clock an hour ahead: the job ran at least $SEC s" \
    python3 -c "import sys,time; sys.exit(0 if time.time() - $begin >= $SEC else 1)"

expect_eq "no process left on any node" "$(leftovers)" ""
