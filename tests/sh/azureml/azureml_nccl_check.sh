#!/usr/bin/env bash
# examples/azureml/nccl-check.yml (the guide's environment validation with
# amldist-nccl-check instead of nccl-tests) run as Azure ML runs an MPI
# command job (tests/azureml.sh), over the stand-in libcudart/libnccl of
# tests/standin: no GPU needed, and what is tested is the wiring (Azure ML's
# mpirun and variables -> amlrun -> the check's communicator, the table, the
# verdict and the exit status of the job), not NCCL.  Each node's stand-in
# GPUs get their own bus ids, as GPUs of another host (the stand-in compares
# bus ids only, where NCCL compares host and bus id).
. "$(dirname "$0")/../../lib.sh"
CHECK=$BUILD/bin/amldist-nccl-check
STANDIN=$BUILD/tests/standin
if [ ! -x "$CHECK" ] || [ ! -e "$STANDIN/libnccl.so.2" ]; then
    skip "Azure ML NCCL check over the stand-ins" "built without CUDA and NCCL headers (no stand-ins, no check)"
    exit 0
fi
. "$TOP/tests/azureml.sh"
MULTINODE_TIMEOUT=100
aml_setup

busids() { local d; for ((d = 0; d < $2; d++)); do printf '0000:%02x:00.0,' $((16 * $1 + d + 1)); done; }
node_busids() { echo "FAKE_CUDA_BUSIDS=$(busids "$1" "$AML_K")"; }
AML_NODE_VARS=node_busids
export LD_LIBRARY_PATH=$STANDIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FAKE_NCCL_DIR=$TEST_TMP/fake
mkdir -p "$FAKE_NCCL_DIR"
STANDIN_VARS=(LD_LIBRARY_PATH FAKE_NCCL_DIR FAKE_CUDA_DEVICES FAKE_CUDA_MEM_FREE)
# rank0 OUT [stdout|stderr]: rank 0's output (mpirun pads rank.0 to rank.00
# from 10 ranks on).
rank0() { cat "$1"/1/rank.0/"${2:-stdout}" "$1"/1/rank.00/"${2:-stdout}" 2>/dev/null; }

aml_load "$AML_DIR/nccl-check.yml"
expect_eq "nccl-check.yml: type mpi, 8 per instance, 2 instances" "$AML_TYPE $AML_K $AML_N" "mpi 8 2"
expect_eq "nccl-check.yml: the job's NCCL_DEBUG reaches the ranks" "${AML_ENV[*]}" "NCCL_DEBUG=WARN"
diag "command: $AML_CMD"

# --- the file's own size, 2 x 8: GPUs too small for the baseline's sizes -----
# The 16 ranks form the communicator and find the least free memory of any
# of them, where 2 x 32 MiB (the baseline's smallest size) does not fit once
# NCCL's share (512 MiB) is kept: exit 4, rank 0 says why.
export FAKE_CUDA_DEVICES=8 FAKE_CUDA_MEM_FREE=560M FAKE_NCCL_LOG=$TEST_TMP/log
aml_run "$TEST_TMP" "$TEST_TMP/small" "${STANDIN_VARS[@]}" FAKE_NCCL_LOG
expect_eq "2 x 8, GPUs too small for the baseline: the job exits 4" "$?" 4
expect_eq "2 x 8: ranks 0-15 of 16 joined one communicator, devices 0-7 on each node" \
    "$(sed -n 's/^init rank=\([0-9]*\) nranks=\([0-9]*\) device=\([0-9]*\) .*/\1 \2 \3/p' "$FAKE_NCCL_LOG" | sort -n | tr '\n' ,)" \
    "$(for r in $(seq 0 15); do printf '%s 16 %s,' "$r" $((r % 8)); done)"
expect_eq "2 x 8: one unique id for all" \
    "$(sed -n 's/.* id=\([0-9a-f]*\).*/\1/p' "$FAKE_NCCL_LOG" | sort -u | wc -l)" 1
unset FAKE_NCCL_LOG
# (mpirun copies it to its console too, which may be all there is when it
# aborts the job before writing rank 0's file)
# mpirun drops the output of ranks it aborts now and then (see the README's
# benchmarks: it loses lines), under a loaded machine even this line: one
# more run is allowed for it, and said.
says_why() {
    grep -q "^amldist-nccl-check: -b 33554432 needs 2 x 33554432 bytes per GPU; the least free memory of any rank is 5[0-9]* bytes, of which [0-9]* may be used ([0-9]* kept for NCCL); --baseline needs sizes of 32 MiB or more$" \
        <(rank0 "$TEST_TMP/small" stderr; cat "$TEST_TMP/small.console")
}
if ! says_why; then
    diag "mpirun lost rank 0's line: running the job once more"
    aml_run "$TEST_TMP" "$TEST_TMP/small" "${STANDIN_VARS[@]}"
fi
check "2 x 8: rank 0 says why" says_why ||
    aml_lines "$TEST_TMP/small" | grep -v 'usable cores' | sort | uniq -c | sed 's/^/#   /' | head -n 20

# --- 2 x 2, a baseline out of reach: the verdict --------------------------------
# The stand-ins move 32 MiB in seconds, not microseconds: one timed operation
# per placement (-n 1 -w 0 appended) instead of the default 25.
aml_scale 2
AML_CMD="$AML_CMD -n 1 -w 0"
export FAKE_CUDA_DEVICES=2 FAKE_CUDA_MEM_FREE=600M
diag "command: $AML_CMD"
aml_run "$TEST_TMP" "$TEST_TMP/run" "${STANDIN_VARS[@]}"
expect_eq "2 x 2 below the A100 baseline: the job exits 1" "$?" 1
out=$(rank0 "$TEST_TMP/run")
check "the table lists 4 ranks on n0 and n1, one stand-in GPU each" \
    test "$(grep -cE '^#  Rank +[0-3] Pid +[0-9]+ on +n[01] device +[01] ' <<<"$out")" = 4
check "the memory note: 8 GiB does not fit, measuring up to 32 MiB" \
    grep -q "^# note: -e 8589934592 needs .*: measuring up to 33554432$" <<<"$out"
expect_eq "one row, 32 MiB of float, every element right" \
    "$(awk '/^ *[0-9]/ { print $1, $2, $3, $4, $9, $13 }' <<<"$out")" "33554432 8388608 float sum 0 0"
check "32 MiB judged against the baseline less 10% (105.97 -> 95.37 GB/s)" \
    grep -q "^# FAIL at 33554432 B: busbw .* < 95.37 GB/s" <<<"$out"
expect_eq "the verdict is the last line" "$(tail -n 1 <<<"$out")" \
    "# FAIL: busbw fell short at 1 of 1 judged sizes"
if [ "$(grep -c '^ *[0-9]' <<<"$out")" != 1 ]; then
    diag "rank 0 said:"
    sed 's/^/#   /' <<<"$out" | tail -n 20
    tail -n 20 "$TEST_TMP/run.console" | sed 's/^/#   /'
fi

expect_eq "no process left on any node" "$(leftovers)" ""
