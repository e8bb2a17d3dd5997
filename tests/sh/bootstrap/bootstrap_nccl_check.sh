#!/usr/bin/env bash
# amldist-nccl-check and the nccl_allreduce example on a machine without a
# GPU: the options, the baselines, and the documented "needs a GPU" message
# and exit status (3), alone and under mpirun.  On a machine with a GPU the
# GPU cases are skipped here (run them by hand, see amldist-nccl-check(1)).
. "$(dirname "$0")/../../lib.sh"
CHECK=$BUILD/bin/amldist-nccl-check
EX=$BUILD/examples/nccl_allreduce
if [ ! -x "$CHECK" ]; then
    skip "amldist-nccl-check" "built without CUDA and NCCL (no nccl.h under CUDA_HOME)"
    exit 0
fi

"$CHECK" --help >"$TEST_TMP/help" 2>&1
expect_eq "--help: exit 0" "$?" 0
check "--help: usage and exit statuses" grep -q "3 no visible GPU" "$TEST_TMP/help"

"$CHECK" --list-baselines >"$TEST_TMP/base" 2>&1
expect_eq "--list-baselines: exit 0 without a GPU" "$?" 0
check "--list-baselines: ND96amsr_A100_v4 at 8 GiB is 187.91" \
    grep -Eq '^ +8589934592 +187\.91$' "$TEST_TMP/base"
check "--list-baselines: ND40rs_v2 at 32 MiB is 14.32" \
    grep -Eq '^ +33554432 +14\.32$' "$TEST_TMP/base"
check "--list-baselines: names its source" grep -q "azureml-examples" "$TEST_TMP/base"

# usage NAME MESSAGE ARGS...: exit 2 and the message
usage() {
    local name=$1 msg=$2; shift 2
    "$CHECK" "$@" >"$TEST_TMP/u.out" 2>"$TEST_TMP/u.err"
    expect_eq "usage: $name: exit 2" "$?" 2
    check "usage: $name: says why" grep -qF -e "$msg" "$TEST_TMP/u.err"
}
usage "-b above -e" "-b larger than -e" -b 1G -e 32M
usage "bad size" "-e 8X: expected a size" -e 8X
usage "datatype" "-d quad: unknown type" -d quad
usage "collective" "-C all_to_one: unknown collective" -C all_to_one
usage "redop" "-o max: only sum" -o max
usage "timeout" "-T 0: expected seconds" -T 0
usage "baseline below its sizes, before running" "its figures start at 33554432 bytes" --baseline ND40rs_v2 -e 16M
usage "baseline of another collective" "the baselines are all_reduce of float" --baseline ND40rs_v2 -C all_gather
usage "baseline of another type" "the baselines are all_reduce of float" --baseline ND40rs_v2 -d half
usage "unknown baseline" "--baseline ND99: unknown" --baseline ND99
usage "both checks" "exclude each other" --baseline ND40rs_v2 --expect-busbw 10
usage "bad busbw" "--expect-busbw fast" --expect-busbw fast
usage "stray argument" "unexpected argument extra" extra

if [ -e /dev/nvidiactl ]; then
    skip "no-GPU message" "this machine has a GPU"
    exit 0
fi

"$CHECK" -e 64M >"$TEST_TMP/ng.out" 2>"$TEST_TMP/ng.err"
expect_eq "no GPU: exit status 3" "$?" 3
check "no GPU: says it needs one" \
    grep -q "^amldist-nccl-check: no visible GPU: this check needs one CUDA device per rank (cudaGetDeviceCount: " "$TEST_TMP/ng.err"
expect_eq "no GPU: nothing on stdout" "$(cat "$TEST_TMP/ng.out")" ""

if have mpirun; then
    $MPIRUN -np 2 sh -c '"$0" --baseline ND96amsr_A100_v4; echo "exit $?"' "$CHECK" \
        >"$TEST_TMP/mpi.out" 2>"$TEST_TMP/mpi.err"
    expect_eq "no GPU under mpirun: both ranks exit 3" "$(grep -c '^exit 3$' "$TEST_TMP/mpi.out")" 2
    expect_eq "no GPU under mpirun: both ranks say why" \
        "$(grep -c 'no visible GPU: this check needs one CUDA device per rank' "$TEST_TMP/mpi.err")" 2
fi

if [ -x "$EX" ]; then
    RANK=0 WORLD_SIZE=1 "$EX" >"$TEST_TMP/ex.out" 2>"$TEST_TMP/ex.err"
    expect_eq "nccl_allreduce without GPU: exit 1" "$?" 1
    check "nccl_allreduce without GPU: ENOGPU from amldist_nccl_comm_init" \
        grep -q "^nccl_allreduce: rank 0: no visible CUDA device (.*) (AMLDIST_ENOGPU)$" "$TEST_TMP/ex.err"
else
    fail "nccl_allreduce is built"
fi
