#!/usr/bin/env bash
# amldist-nccl-check and amldist_nccl_comm_init() over the stand-in
# libcudart/libnccl of tests/standin (no GPU needed).  These test OUR code:
# the wiring (one id for every rank, rank/nranks/device), the table, #wrong,
# the verdict, memory fitting, and what happens when a rank fails, dies,
# hangs or reports an asynchronous error.  They say nothing about NCCL or
# CUDA themselves; scripts/gpu-run.sh runs the same programs on a GPU.
. "$(dirname "$0")/../../lib.sh"
CHECK=$BUILD/bin/amldist-nccl-check
EX=$BUILD/examples/nccl_allreduce
STANDIN=$BUILD/tests/standin
if [ ! -x "$CHECK" ] || [ ! -e "$STANDIN/libnccl.so.2" ]; then
    skip "nccl check over the stand-ins" "built without CUDA and NCCL headers (no stand-ins, no check)"
    exit 0
fi
export LD_LIBRARY_PATH=$STANDIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FAKE_NCCL_DIR=$TEST_TMP
SMALL=(-b 4K -e 64K -f 4 -n 2 -w 1)

# under_amlrun N ARGS...: the check on N stand-in GPUs, one rank each.
under_amlrun() {
    local n=$1
    shift
    FAKE_CUDA_DEVICES=$n timeout 120 "$AMLRUN" --nproc-per-node "$n" \
        --cpu-bind none "$CHECK" "$@" >"$TEST_TMP/out" 2>"$TEST_TMP/err"
}

# pair ENV0 ENV1 PROGRAM ARGS...: ranks 0 and 1 as separate processes with
# no launcher to stop the survivor, so that the program itself must notice.
# Sets rc0 and rc1.  Each runs under a 60 s timeout, below the default
# 300 s of -T and of the bootstrap: a rank that waited for those instead of
# noticing ends by the timeout, 124; the checks look at what ended it.
pair() {
    local env0=$1 env1=$2 port=$((30000 + RANDOM % 20000))
    shift 2
    local job="WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port LOCAL_WORLD_SIZE=1 LOCAL_RANK=0"
    local pid
    # shellcheck disable=SC2086
    # Rank 1's stand-in GPU has its own bus id, as on another node.
    env $job RANK=1 FAKE_CUDA_BUSIDS=0000:00:07.0 $env1 timeout 60 "$@" >"$TEST_TMP/r1" 2>&1 &
    pid=$!
    # shellcheck disable=SC2086
    env $job RANK=0 $env0 timeout 60 "$@" >"$TEST_TMP/r0" 2>&1
    rc0=$?
    wait "$pid"
    rc1=$?
}

# --- the wiring: one id, the right ranks and devices ----------------------
FAKE_NCCL_LOG=$TEST_TMP/log under_amlrun 3 "${SMALL[@]}"
expect_eq "3 ranks: exit 0" "$?" 0
expect_eq "3 ranks: three inits" "$(grep -c '^init ' "$TEST_TMP/log")" 3
expect_eq "3 ranks: one unique id for all" \
    "$(sed -n 's/.* id=\([0-9a-f]*\).*/\1/p' "$TEST_TMP/log" | sort -u | wc -l)" 1
expect_eq "3 ranks: ranks 0, 1, 2 of 3 on devices 0, 1, 2" \
    "$(sed -n 's/^init rank=\([0-9]*\) nranks=\([0-9]*\) device=\([0-9]*\) .*/\1 \2 \3/p' "$TEST_TMP/log" | sort | tr '\n' ,)" \
    "0 3 0,1 3 1,2 3 2,"
check "3 ranks: rank 0 lists every rank's device" \
    grep -q "^#  Rank   2 Pid .* device  2 \[0000:00:08.0\] Stand-in GPU" "$TEST_TMP/out"

# --- the table -------------------------------------------------------------
under_amlrun 2 -C all -d all -b 1K -e 32K -f 32 -n 1 -w 0
expect_eq "every collective and type: exit 0" "$?" 0
for c in all_reduce all_gather reduce_scatter broadcast reduce alltoall; do
    check "table for $c" grep -qx "# $c" "$TEST_TMP/out"
done
rows=$(grep -c '^ *[0-9]' "$TEST_TMP/out")
expect_eq "6 collectives x 10 types x 2 sizes: 120 rows" "$rows" 120
expect_eq "every #wrong is 0 (or N/A for alltoall in place)" \
    "$(awk '/^ *[0-9]/ && !($9 == 0 && ($13 == 0 || $13 == "N/A"))' "$TEST_TMP/out" | wc -l)" 0
check "Out of bounds values : 0 OK" grep -qx "# Out of bounds values : 0 OK" "$TEST_TMP/out"
expect_eq "header and rows have nccl-tests' widths (116 columns)" \
    "$(grep -E '^(#  *size|#  *\(B\)| *[0-9])' "$TEST_TMP/out" | awk '{ print length($0) }' | sort -u)" 116
check "redop is none where nothing is reduced" \
    grep -Eq '^ +1024 +1024 +int8 +none +0 ' "$TEST_TMP/out"

# --- wrong values ----------------------------------------------------------
FAKE_NCCL_CORRUPT_RANK=1 under_amlrun 2 "${SMALL[@]}"
expect_eq "a rank with wrong results: exit 1" "$?" 1
expect_eq "one wrong element per placement and size" \
    "$(awk '/^ *[0-9]/ { print $9, $13 }' "$TEST_TMP/out" | sort -u)" "1 1"
check "Out of bounds counts the 6 measurements (3 sizes, 2 placements)" \
    grep -qx "# Out of bounds values : 6 FAILED" "$TEST_TMP/out"
check "the verdict names them" grep -qx "# FAIL: 6 wrong values in 6 measurements" "$TEST_TMP/out"

# --- the verdict: every judged size, printed before any rank leaves ---------
under_amlrun 2 -b 4K -e 64K -f 4 -n 1 -w 0 --expect-busbw 100000
expect_eq "--expect-busbw out of reach: exit 1" "$?" 1
check "the largest size (the run stays below 32M) is judged" \
    grep -q "^# FAIL at 65536 B: busbw .* < 100000.00 GB/s (--expect-busbw 100000.00)$" "$TEST_TMP/out"
check "the verdict line is printed although rank 1 fails too" \
    grep -qx "# FAIL: busbw fell short at 1 of 1 judged sizes" "$TEST_TMP/out"
under_amlrun 2 -b 4K -e 64K -f 4 -n 1 -w 0 --expect-busbw 0.000001
expect_eq "--expect-busbw within reach: exit 0" "$?" 0
check "PASS line" grep -qx "# PASS: busbw reached the threshold at 1 of 1 judged sizes" "$TEST_TMP/out"

# --- memory: the largest size that fits ------------------------------------
FAKE_CUDA_MEM_FREE=$((600 << 20)) under_amlrun 2 -b 1M -e 1G -f 8 -n 1 -w 0 -c 0
expect_eq "-e beyond free memory: still runs" "$?" 0
check "-e beyond free memory: says what it measures" \
    grep -q "^# note: -e 1073741824 needs 2 x 1073741824 bytes per GPU; the least free memory of any rank is [0-9]* bytes, of which [0-9]* may be used: measuring up to 8388608$" "$TEST_TMP/out"
expect_eq "-e beyond free memory: the last row is 8 MiB" \
    "$(awk '/^ *[0-9]/ { s = $1 } END { print s }' "$TEST_TMP/out")" 8388608
FAKE_CUDA_MEM_FREE=$((560 << 20)) under_amlrun 2 -b 1M -e 1G --baseline ND96amsr_A100_v4 -n 1 -w 0
expect_eq "a baseline the GPUs cannot hold: exit 4" "$?" 4
check "a baseline the GPUs cannot hold: says why" \
    grep -q "needs sizes of 33554432 bytes or more, and the GPUs hold no more than" "$TEST_TMP/err"

# --- failures without a launcher to clean up -------------------------------
pair "" "FAKE_NCCL_DIE=1:12" "$CHECK" "${SMALL[@]}"
expect_eq "a peer that dies: its status" "$rc1" 9
expect_eq "a peer that dies: rank 0 exits 4 (not at the timeout: 124)" "$rc0" 4
check "a peer that dies: rank 0 says NCCL reported it and aborts" \
    grep -q "rank 0: all_reduce of .*: NCCL reports .*; aborting the communicator" "$TEST_TMP/r0"

pair "" "FAKE_NCCL_HANG=1:12" "$CHECK" "${SMALL[@]}" -T 2
expect_eq "a peer that hangs: rank 0 exits 4" "$rc0" 4
expect_eq "a peer that hangs: rank 1 exits 4" "$rc1" 4
# After -T 2, not the default 300 s: the first to reach its limit aborts,
# naming it; the other may see that abort first.
check "a peer that hangs: the message names the operation and the limit" \
    grep -q "rank .: all_reduce of 4096 bytes of float, in place did not finish within 2 s" "$TEST_TMP/r0" "$TEST_TMP/r1"

pair "" "FAKE_NCCL_ASYNC_ERROR=1:12" "$CHECK" "${SMALL[@]}"
expect_eq "an asynchronous error on rank 1: it exits 4" "$rc1" 4
expect_eq "an asynchronous error on rank 1: rank 0 exits 4 (not at the timeout: 124)" "$rc0" 4
check "an asynchronous error: rank 1 aborts" grep -q "rank 1: .*NCCL reports .*aborting" "$TEST_TMP/r1"

# A rank that cannot start: the other learns it from the bootstrap at once,
# not after the 300 s bootstrap timeout.
for prog in "$EX" "$CHECK"; do
    name=$(basename "$prog")
    pair "" "FAKE_CUDA_DEVICES=0" "$prog" -n 1 2>/dev/null
    [ "$name" = nccl_allreduce ] && want1=1 || want1=3
    expect_eq "$name: rank 1 without a GPU exits $want1" "$rc1" "$want1"
    check "$name: rank 1 without a GPU: rank 0 fails ($rc0), not by the 60 s timeout" \
        test "$rc0" -ne 0 -a "$rc0" -ne 124
    check "$name: rank 0 names rank 1" grep -q "rank 0: rank 1 failed: rank 1: no visible CUDA device" "$TEST_TMP/r0"
    pair "FAKE_CUDA_DEVICES=0" "" "$prog" -n 1
    check "$name: rank 0 without a GPU: rank 1 fails ($rc1), not by the 60 s timeout" \
        test "$rc1" -ne 0 -a "$rc1" -ne 124
    check "$name: rank 1 names rank 0" grep -q "rank 1: rank 0 failed: rank 0: no visible CUDA device" "$TEST_TMP/r1"
done

# --- more ranks than GPUs --------------------------------------------------
FAKE_CUDA_DEVICES=1 timeout 60 "$AMLRUN" --nproc-per-node 2 --cpu-bind none "$EX" \
    >"$TEST_TMP/out" 2>"$TEST_TMP/err"
expect_eq "2 ranks on 1 GPU: exit 1" "$?" 1
check "2 ranks on 1 GPU: refused before NCCL, with the way out" \
    grep -q "2 ranks on this node (local rank .) but 1 visible CUDA device: ranks would share a GPU.*AMLDIST_GPU_SHARE=1" "$TEST_TMP/err"
AMLDIST_GPU_SHARE=1 FAKE_CUDA_DEVICES=1 timeout 60 "$AMLRUN" --nproc-per-node 2 --cpu-bind none "$EX" \
    >"$TEST_TMP/out" 2>"$TEST_TMP/err"
check "AMLDIST_GPU_SHARE=1: both on the GPU, and NCCL's refusal is passed on" \
    grep -q "Duplicate GPU detected" "$TEST_TMP/err"

# amlrun with more workers than GPUs (9 on a p4d's 8): it warns, marks the
# shared ranks, and the library refuses them before NCCL would.
P4D=$TOP/tests/topologies/real/aws-ofi-nccl/p4d-topology.xml
buses=$("$AMLRUN" --nproc-per-node 8 --cpu-bind none --topology "$P4D" --dry-run true 2>/dev/null |
    sed -n 's/.* AMLDIST_GPU=\([^ ]*\).*/\1/p' | tr '\n' , | sed 's/,$//')
FAKE_CUDA_DEVICES=8 FAKE_CUDA_BUSIDS=$buses timeout 60 "$AMLRUN" --nproc-per-node 9 --cpu-bind none \
    --topology "$P4D" "$EX" >"$TEST_TMP/out" 2>"$TEST_TMP/err"
check "9 workers on 8 GPUs: exit non-zero" test "$?" -ne 0
check "9 workers on 8 GPUs: amlrun warns" grep -q "warning: 9 ranks on 8 GPUs: ranks share GPUs" "$TEST_TMP/err"
# Ranks 0 and 8 share the first GPU and both are refused; the first to fail
# ends the job, and under load the other may be stopped before it says so.
check "9 workers on 8 GPUs: a shared rank is refused before NCCL" \
    grep -Eq "rank [08]: AMLDIST_GPU=${buses%%,*} is shared with another rank of this node" "$TEST_TMP/err"
check "9 workers on 8 GPUs: NCCL never got to see the duplicate" \
    sh -c '! grep -q "Duplicate GPU detected :" "$0"' "$TEST_TMP/err"

# One rank: busbw is 0 by definition, so a threshold on it is refused before
# anything starts.
FAKE_CUDA_DEVICES=1 RANK=0 WORLD_SIZE=1 timeout 30 "$CHECK" --expect-busbw 1 >"$TEST_TMP/out" 2>"$TEST_TMP/err"
expect_eq "one rank with --expect-busbw: exit 2" "$?" 2
check "one rank with --expect-busbw: says why" grep -q "judges busbw, which is 0 with one rank" "$TEST_TMP/err"
