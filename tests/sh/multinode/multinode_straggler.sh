#!/usr/bin/env bash
# Stragglers across nodes: a gloo job on 2 nodes of the namespace cluster
# whose rank 3 (node 1) reaches every step 40 ms after the others (each
# rank calls amldist.progress(step) as it arrives at the step's
# all_reduce).  The host's node (node 0), from every node's marks on its
# own clock, names rank 3 at the end, once; node 1 says nothing of it.
# Again with node 1's clock an hour behind (AMLDIST_TEST_CLOCK_SHIFT_MS):
# taken at its word, node 1's ranks would arrive an hour early and a rank
# of node 0 would be named; node 1's estimate of its offset (-v) is the
# hour, within its error bound.  The second job takes the same steps
# without PyTorch (RING_DIR: tests/amlrun/ring.py's all_reduce over Unix
# sockets in place of gloo's): what it varies is the clock.
# amldist-test: slow
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
if ! have_torch torch.distributed; then
    skip "multi-node stragglers" "$TORCH_PY cannot import torch"
    exit 0
fi
MULTINODE_TIMEOUT=150
multinode_setup 2

JOB=$TOP/tests/amlrun/ddp_straggler.py
export SLOW_RANK=3 SLOW_MS=40 STEPS=60 OMP_NUM_THREADS=1 PYTHONPATH=$TOP/python

# run TAG [ENV-FOR-NODE-1...]; RING=(RING_DIR=...): a job without PyTorch
RING=()
run() {
    local tag=$1
    shift
    on n0 $T env PYTHONPATH="$PYTHONPATH" "${RING[@]}" "$AMLRUN" --nnodes 2 --node-rank 0 --master-addr n0 \
        --master-port "$PORT" --nproc-per-node 2 --python "$TORCH_PY" "$JOB" \
        >"$TEST_TMP/$tag.out0" 2>"$TEST_TMP/$tag.0" &
    local p0=$!
    on n1 $T env PYTHONPATH="$PYTHONPATH" "${RING[@]}" "$@" "$AMLRUN" -v --nnodes 2 --node-rank 1 --master-addr n0 \
        --master-port "$PORT" --nproc-per-node 2 --python "$TORCH_PY" "$JOB" \
        >"$TEST_TMP/$tag.out1" 2>"$TEST_TMP/$tag.1"
    echo $? >"$TEST_TMP/$tag.rc1"
    wait $p0
    echo $? >"$TEST_TMP/$tag.rc0"
    PORT=$((PORT + 7))
}

check_slowest() {
    local tag=$1 name=$2 line
    expect_eq "$name: node 0 exits 0" "$(cat "$TEST_TMP/$tag.rc0")" 0
    expect_eq "$name: node 1 exits 0" "$(cat "$TEST_TMP/$tag.rc1")" 0
    line=$(grep '^amlrun: slowest rank' "$TEST_TMP/$tag.0")
    check "$name: node 0 names rank 3 on node 1" \
        grep -Eq '^amlrun: slowest rank 3: node 1, [0-9.]+ ms behind the median over [0-9]+ steps' \
        "$TEST_TMP/$tag.0"
    # Its lag: tens of ms (the 40 ms, less the median's share), not an hour.
    ms=$(sed -n 's/^amlrun: slowest rank 3: node 1, \([0-9.]*\) ms behind.*/\1/p' "$TEST_TMP/$tag.0")
    check "$name: its lag ($ms ms) is of the injected 40 ms" \
        python3 -c "import sys; v=float(sys.argv[1] or 'nan'); sys.exit(0 if 10 <= v <= 400 else 1)" "$ms"
    check "$name: said once, by node 0 alone" \
        sh -c "! grep -q 'slowest rank' '$TEST_TMP/$tag.1' && [ \$(grep -c 'slowest rank' '$TEST_TMP/$tag.0') = 1 ]"
    if [ -z "$line" ] || [ -n "${VERBOSE:-}" ]; then diag "$(cat "$TEST_TMP/$tag.0" "$TEST_TMP/$tag.1")"; fi
}

run plain
check_slowest plain "a straggler on node 1"
mkdir -p "$TEST_TMP/ring"
RING=(RING_DIR="$TEST_TMP/ring")
run shifted AMLDIST_TEST_CLOCK_SHIFT_MS=-3600000
RING=()
check_slowest shifted "node 1's clock an hour behind"
# Node 1's estimate of its offset (-v): the injected hour, within its bound.
read -r off err < <(sed -n 's/^amlrun: rendezvous: the host.s clock reads this node.s \([-+0-9.]*\) ms, within \([0-9.]*\) ms$/\1 \2/p' \
    "$TEST_TMP/shifted.1")
check "node 1's clock an hour behind: its offset ($off ms, within $err ms) is the hour" \
    python3 -c "import sys; o, e = float(sys.argv[1]), float(sys.argv[2]); \
sys.exit(0 if abs(o - 3600000) <= e + 0.001 and e < 1000 else 1)" "${off:-nan}" "${err:-nan}"

expect_eq "no process left on any node" "$(leftovers)" ""
