#!/usr/bin/env bash
# amlrun's own layout against its options: a value the launcher does not
# give is never passed on or shown as a number (the library's -993), an
# option may fill in or repeat what the launcher says but not contradict it,
# and layouts too large are usage errors (2) that name the option.
. "$(dirname "$0")/../lib.sh"
. "$TOP/tests/amlrun/common.sh"
d=$TEST_TMP/layout
mkdir -p "$d"

# run ENV... -- ARGS...: amlrun in a clean environment (no launcher of the
# test's own), stdout in $d/out, stderr in $d/err, status in $rc
run() {
    local e=()
    while [ "$1" != -- ]; do e+=("$1"); shift; done
    shift
    env -i PATH="$PATH" HOME="$HOME" AMLRUN_PYTHON="$TORCH_PY" "${e[@]}" \
        "$AMLRUN" "$@" >"$d/out" 2>"$d/err"
    rc=$?
}
no_code() { ! grep -q -- '-99[0-9]' "$d/out" "$d/err" "$d"/ran.* 2>/dev/null; }
# a worker that shows what it got (and, given a directory, leaves a file)
printf '#!/bin/sh\nline="$LOCAL_RANK ${NODE_RANK-none} ${GROUP_RANK-none} $*"\n[ -n "${DIR-}" ] && echo "$line" >"$DIR/ran.$RANK"\necho "$line"\n' >"$d/show"
chmod 755 "$d/show"

# --- the launcher gives this amlrun's rank but not where it sits on its node
for e in "RANK=0 WORLD_SIZE=2" "PMI_RANK=0 PMI_SIZE=2"; do
    rm -f "$d"/ran.*
    run $e MASTER_ADDR=127.0.0.1 DIR="$d" -- --nproc-per-node 2 --legacy-launch \
        --no-python "$d/show"
    expect_eq "$e, --nproc-per-node 2: usage error" "$rc" 2
    check "$e: one message naming LOCAL_RANK" \
        test "$(grep -c '^amlrun: ' "$d/err")" = 1 -a "$(grep -c 'LOCAL_RANK' "$d/err")" = 1
    check "$e: no worker started" test ! -e "$d/ran.0"
    check "$e: no -993 anywhere" no_code
    run $e MASTER_ADDR=127.0.0.1 -- --nproc-per-node 2 --dry-run --no-python true
    expect_eq "$e, --dry-run: usage error too" "$rc" 2
    check "$e, --dry-run: no 'node -993'" no_code
done

# --- the local rank given, the node rank still unknown: left out, shown '?'
L="RANK=1 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1"
run $L -- --nproc-per-node 2 --legacy-launch --prefix='%r/%l/%n/%%n:' --no-python "$d/show"
expect_eq "node rank unknown: the job runs" "$rc" 0
expect_eq "node rank unknown: %n is '?', NODE_RANK and GROUP_RANK left out" \
    "$(sort "$d/out")" "$(printf '2/0/?/%%n:0 none none --local_rank=0\n3/1/?/%%n:1 none none --local_rank=1')"
check "node rank unknown: no -993 anywhere" no_code
run $L -- --nproc-per-node 2 --dry-run --no-python true
check "node rank unknown: --dry-run says 'node ?'" grep -q '^rank 3 (local 1, node ?): ' "$d/out"
check "node rank unknown, --dry-run: no -993" no_code

# --- explicit options against the launcher (Slurm: this is node 1 of 2)
S="SLURM_JOB_ID=7 SLURM_STEP_ID=0 SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_LOCALID=0
   SLURM_NODEID=1 SLURM_NNODES=2 SLURM_STEP_TASKS_PER_NODE=1(x2) MASTER_ADDR=127.0.0.1"
for opt in "--node-rank 0" "--nnodes 1" "--nnodes 3" "--standalone"; do
    run $S -- $opt --nproc-per-node 2 --dry-run --no-python true
    expect_eq "Slurm node 1 of 2, $opt: usage error" "$rc" 2
    check "Slurm node 1 of 2, $opt: one message" test "$(grep -c '^amlrun: ' "$d/err")" = 1
done
run $S -- --node-rank 0 --nproc-per-node 2 --dry-run --no-python true
check "--node-rank 0 on SLURM_NODEID=1: names both" \
    grep -q "option node_rank=0 conflicts with SLURM_NODEID=1" "$d/err"
run $S -- --standalone --nproc-per-node 2 --dry-run --no-python true
check "--standalone on 2 Slurm nodes: names the node count" grep -q "SLURM_NNODES=2" "$d/err"
run $S -- --node-rank 1 --nnodes 2 --nproc-per-node 2 --dry-run --no-python true
expect_eq "options that repeat Slurm's values: accepted" "$rc" 0
check "options that repeat Slurm's values: ranks 2,3 on node 1" \
    grep -q "^rank 3 (local 1, node 1): .*NODE_RANK=1 " "$d/out"
# the master is not part of the ranks: an option replaces MASTER_ADDR whole
run $S -- --master-addr 10.9.9.9 --master-port 4242 --nproc-per-node 2 --dry-run --no-python true
check "--master-addr replaces MASTER_ADDR" \
    grep -q "^rank 2 (local 0, node 1): .*MASTER_ADDR=10.9.9.9 MASTER_PORT=4242 " "$d/out"

# --- sizes: usage errors that name the option, not a library function
run -- --nnodes 524288 --node-rank 0 --nproc-per-node 4096 --dry-run --no-python true
expect_eq "--nnodes 524288 --nproc-per-node 4096: usage error" "$rc" 2
check "--nnodes 524288 --nproc-per-node 4096: one message naming the option" \
    test "$(cat "$d/err")" = "amlrun: --nproc-per-node 4096 with world size 524288 (option num_nodes=524288 (one process per node)): 2147483648 ranks, more than 2147483647"
run -- --nproc-per-node 5000 --dry-run --no-python true
expect_eq "--nproc-per-node 5000: usage error" "$rc" 2
expect_eq "--nproc-per-node 5000: names the option and the range" "$(cat "$d/err")" \
    "amlrun: --nproc-per-node 5000: want a number from 1 to 4096, 'gpu', 'auto' or 'cpu' (see amlrun --help)"
run -- --nproc-per-node 4096 --cpu-bind none --dry-run --no-python true
expect_eq "--nproc-per-node 4096: accepted" "$rc" 0
