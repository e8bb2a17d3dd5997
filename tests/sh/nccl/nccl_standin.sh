#!/usr/bin/env bash
# The stand-in libcudart and libnccl (tests/standin/) on their own, then the
# nccl_allreduce example through them.  They are NOT CUDA and NOT NCCL: they
# let the tests run OUR NCCL paths (libamldist's dlopen, device choice and
# id exchange, amldist-nccl-check) on machines without a GPU, ranks
# exchanging data through files.  This checks that they compute right and
# fail as documented, so that the tests built on them can be believed.
# amldist-test: slow (one of the longest: tests/run.sh starts it early)
. "$(dirname "$0")/../../lib.sh"
SI=$BUILD/tests/standin
DRV=$SI/standin_driver
if [ ! -x "$DRV" ] || [ ! -e "$SI/libnccl.so.2" ]; then
    skip "nccl stand-ins" "not built: no CUDA runtime and NCCL headers" \
        "(cuda_runtime_api.h, nccl.h) were found at build time"
    exit 0
fi
diag "these test the stand-in libcudart/libnccl (not CUDA, not NCCL)"

# Nothing from the caller's environment steers the stand-ins.
while IFS='=' read -r name _; do
    case $name in FAKE_CUDA_* | FAKE_NCCL_* | STANDIN_*) unset "$name" ;; esac
done < <(env)
unset CUDA_VISIBLE_DEVICES
export TMPDIR=$TEST_TMP/tmp FAKE_NCCL_DIR=$TEST_TMP/nccl
mkdir -p "$TMPDIR" "$FAKE_NCCL_DIR"

# ranks N OUT ARGS...: runs N driver ranks at once (RANK, WORLD_SIZE, the
# unique id in a file) and waits; rank R's output in OUT.R, status in OUT.R.rc
ranks() {
    local n=$1 out=$2 r
    local pids=()
    shift 2
    rm -f "$TEST_TMP/id"
    for ((r = 0; r < n; r++)); do
        RANK=$r WORLD_SIZE=$n STANDIN_ID_FILE=$TEST_TMP/id \
            timeout -k 5 60 "$@" >"$out.$r" 2>&1 &
        pids+=($!)
    done
    for ((r = 0; r < n; r++)); do
        wait "${pids[r]}"
        echo $? >"$out.$r.rc"
    done
}
rc() { cat "$1.rc"; }
has() { grep -qF -e "$2" "$1" || { diag "$1:"; sed 's/^/#   /' "$1"; false; }; }
leftovers() { find "$FAKE_NCCL_DIR" "$TMPDIR" -mindepth 1 | wc -l; }

# --- the runtime alone ------------------------------------------------------
o=$TEST_TMP/units
FAKE_CUDA_DEVICES=3 FAKE_CUDA_BUSIDS=0000:00:06.0,0000:1A:00.0 \
    FAKE_CUDA_MEM_FREE=1M timeout 60 "$DRV" units >"$o" 2>&1
expect_eq "units: exit 0" "$?" 0
check "units: devices, bus ids, memory, streams, events, half/bf16, errors" \
    has "$o" "rank 0: units: all right"

FAKE_CUDA_DEVICES=0 RANK=0 WORLD_SIZE=1 STANDIN_ID_FILE=$TEST_TMP/id \
    timeout 60 "$DRV" init >"$o" 2>&1
check "FAKE_CUDA_DEVICES=0: cudaGetDeviceCount says no device" \
    has "$o" "cudaGetDeviceCount(&count): no CUDA-capable device is detected"

FAKE_CUDA_DEVICES=3 CUDA_VISIBLE_DEVICES=2,0 FAKE_NCCL_LOG=$TEST_TMP/cvd.log \
    RANK=0 WORLD_SIZE=1 STANDIN_ID_FILE=$TEST_TMP/id timeout 60 "$DRV" init \
    >"$o" 2>&1
check "CUDA_VISIBLE_DEVICES=2,0: device 0 is the third" \
    grep -q "device=0 busid=0000:00:08.0" "$TEST_TMP/cvd.log"

# --- right answers ----------------------------------------------------------
for n in 1 2 3; do
    o=$TEST_TMP/coll$n
    FAKE_CUDA_DEVICES=3 ranks $n "$o" "$DRV" collectives
    good=0
    for ((r = 0; r < n; r++)); do
        [ "$(rc "$o.$r")" = 0 ] && has "$o.$r" "collectives: all right" &&
            good=$((good + 1))
    done
    expect_eq "$n ranks: all_reduce (5 ops), reduce, broadcast, all_gather, reduce_scatter, alltoall right in 10 types; half/bf16 rounding" \
        "$good" "$n"
done
expect_eq "no files left behind by clean runs" "$(leftovers)" 0

o=$TEST_TMP/amlrun
rm -f "$TEST_TMP/id" # or rank 1 may read the last run's id
FAKE_CUDA_DEVICES=2 STANDIN_ID_FILE=$TEST_TMP/id timeout 120 "$AMLRUN" \
    --nproc-per-node 2 --master-port $((20000 + RANDOM % 10000)) --cpu-bind none --no-python "$DRV" collectives \
    >"$o" 2>&1
st=$?
expect_eq "2 ranks under amlrun: exit 0" "$st" 0
expect_eq "2 ranks under amlrun: both right" \
    "$(grep -c 'collectives: all right' "$o")" 2
[ "$st" = 0 ] || sed 's/^/#   /' "$o"

o=$TEST_TMP/corrupt
FAKE_NCCL_CORRUPT_RANK=1 FAKE_CUDA_DEVICES=2 ranks 2 "$o" "$DRV" poll 3
expect_eq "FAKE_NCCL_CORRUPT_RANK=1: rank 1 has one wrong element each time" \
    "$(grep -c 'iteration [0-2]: 1 wrong' "$o.1"):$(rc "$o.1")" "3:5"
expect_eq "FAKE_NCCL_CORRUPT_RANK=1: rank 0 is right" \
    "$(grep -c 'iteration [0-2]: 0 wrong' "$o.0"):$(rc "$o.0")" "3:0"

# --- init -------------------------------------------------------------------
o=$TEST_TMP/dup
FAKE_CUDA_DEVICES=1 ranks 2 "$o" "$DRV" init
expect_eq "one GPU for two ranks: both fail" "$(rc "$o.0"):$(rc "$o.1")" "2:2"
check "one GPU for two ranks: NCCL's words (rank 0)" has "$o.0" \
    "init: 5 (invalid usage (run with NCCL_DEBUG=WARN for details)): Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 0000:00:06.0"
check "one GPU for two ranks: NCCL's words (rank 1)" has "$o.1" \
    "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 0000:00:06.0"

o=$TEST_TMP/nranks
rm -f "$TEST_TMP/id"
RANK=0 WORLD_SIZE=2 STANDIN_ID_FILE=$TEST_TMP/id FAKE_CUDA_DEVICES=2 \
    timeout 60 "$DRV" init >"$o.0" 2>&1 &
RANK=1 WORLD_SIZE=2 STANDIN_NRANKS=3 STANDIN_ID_FILE=$TEST_TMP/id \
    FAKE_CUDA_DEVICES=2 timeout 60 "$DRV" init >"$o.1" 2>&1
wait
check "nranks 2 and 3: invalid usage" has "$o.0" \
    "init: 5 (invalid usage (run with NCCL_DEBUG=WARN for details)): fake NCCL: rank 0 has nranks 2, rank 1 has nranks 3"

o=$TEST_TMP/initfail
FAKE_NCCL_INIT_FAIL=1 FAKE_CUDA_DEVICES=3 ranks 3 "$o" "$DRV" init
expect_eq "FAKE_NCCL_INIT_FAIL=1: every rank fails" \
    "$(rc "$o.0"):$(rc "$o.1"):$(rc "$o.2")" "2:2:2"
check "FAKE_NCCL_INIT_FAIL=1: rank 1 gets ncclSystemError" has "$o.1" \
    "init: 2 (unhandled system error"
# (what a rank names depends on what it sees first: rank 1's abort, rank
# 0's own, made on seeing rank 1's, or rank 0 gone, the id's maker; at
# once: a rank that waited for a timeout would say "timed out", status 2)
for r in 0 2; do
    check "FAKE_NCCL_INIT_FAIL=1: rank $r gets ncclRemoteError" has "$o.$r" \
        "init: 6 (remote process exited or there was a network error): fake NCCL: rank $r: "
done

o=$TEST_TMP/timeout
FAKE_NCCL_INIT_TIMEOUT=0.5 STANDIN_NRANKS=2 ranks 1 "$o" "$DRV" init
check "a rank that never comes: ncclSystemError after FAKE_NCCL_INIT_TIMEOUT" \
    has "$o.0" "init: 2 (unhandled system error (run with NCCL_DEBUG=INFO for details)): fake NCCL: rank 0: timed out after 0.5 s waiting for rank 1 to join"

# --- streams and faults -----------------------------------------------------
o=$TEST_TMP/notready
FAKE_CUDA_DEVICES=3 ranks 3 "$o" "$DRV" notready
expect_eq "late peers: every rank ends right" \
    "$(rc "$o.0"):$(rc "$o.1"):$(rc "$o.2")" "0:0:0"
check "late peers: cudaStreamQuery is not ready until they post" \
    has "$o.0" "cudaStreamQuery while peers are late: cudaErrorNotReady"

o=$TEST_TMP/die
FAKE_NCCL_DIE=1:2 FAKE_CUDA_DEVICES=3 ranks 3 "$o" "$DRV" poll 5
expect_eq "FAKE_NCCL_DIE=1:2: rank 1 exits 9, the others see an async error" \
    "$(rc "$o.0"):$(rc "$o.1"):$(rc "$o.2")" "3:9:3"
check "FAKE_NCCL_DIE=1:2: at operation 2, ncclRemoteError, peer exited" \
    has "$o.0" "iteration 2: async error after"
# (rank 2 may see rank 0's abort first; rank 0 looks at rank 1 first)
check "FAKE_NCCL_DIE=1:2: the message says which peer" \
    grep -q "remote process exited or there was a network error: fake NCCL: rank 0: peer rank 1 (pid [0-9]*) exited" "$o.0"
# (seen through the error, not at the 60 s timeout: that would be 124)
check "after ncclCommAbort the stream drains" has "$o.0" "stream drained after abort"

o=$TEST_TMP/kill
rm -f "$TEST_TMP/id"
RANK=0 WORLD_SIZE=2 STANDIN_ID_FILE=$TEST_TMP/id FAKE_CUDA_DEVICES=2 \
    timeout 60 "$DRV" poll 1 >"$o.0" 2>&1 &
p0=$!
# (in a subshell whose stderr is not ours: bash would report the kill)
(RANK=1 WORLD_SIZE=2 STANDIN_ID_FILE=$TEST_TMP/id FAKE_CUDA_DEVICES=2 \
    STANDIN_SLEEP_RANK=1 timeout 60 "$DRV" poll 1 >"$o.1" 2>&1; true) 2>/dev/null &
p1=$!
for _ in $(seq 200); do grep -q sleeping "$o.1" && break; sleep 0.05; done
victim=$(sed -n 's/.*sleeping (pid \([0-9]*\)).*/\1/p' "$o.1")
sleep 0.2
[ -n "$victim" ] && kill -KILL "$victim"
wait "$p0"
st=$?
wait "$p1"
expect_eq "peer killed with SIGKILL: async error (exit 3, not the timeout's 124)" "$st" 3
check "peer killed with SIGKILL: says so" \
    grep -q "remote process exited or there was a network error: fake NCCL: rank 0: peer rank 1 (pid $victim) exited" "$o.0"

o=$TEST_TMP/async
FAKE_NCCL_ASYNC_ERROR=1:1 FAKE_CUDA_DEVICES=2 ranks 2 "$o" "$DRV" poll 3
expect_eq "FAKE_NCCL_ASYNC_ERROR=1:1: both ranks end by the async error" \
    "$(rc "$o.0"):$(rc "$o.1")" "3:3"
check "FAKE_NCCL_ASYNC_ERROR=1:1: rank 1 gets ncclRemoteError at operation 1" \
    has "$o.1" "iteration 1: async error after"
check "FAKE_NCCL_ASYNC_ERROR=1:1: rank 0 then sees rank 1's abort" \
    has "$o.0" "fake NCCL: rank 0: peer rank 1 aborted"
check "FAKE_NCCL_ASYNC_ERROR=1:1: operation 0 was fine" \
    has "$o.1" "iteration 0: 0 wrong"

o=$TEST_TMP/hang
FAKE_NCCL_HANG=1:1 STANDIN_TIMEOUT=1 FAKE_CUDA_DEVICES=2 ranks 2 "$o" "$DRV" poll 3
expect_eq "FAKE_NCCL_HANG=1:1: no async error anywhere, rank 0 times out" \
    "$(rc "$o.0"):$(rc "$o.1")" "4:3"
check "FAKE_NCCL_HANG=1:1: rank 0 waited its whole second at operation 1" \
    has "$o.0" "iteration 1: timeout after"
check "FAKE_NCCL_HANG=1:1: rank 1 sees rank 0's abort" \
    has "$o.1" "fake NCCL: rank 1: peer rank 0 aborted"

# --- the example, through libamldist's dlopen and amlrun --------------------
EX=$BUILD/examples/nccl_allreduce
o=$TEST_TMP/example
if [ -x "$EX" ]; then
    LD_LIBRARY_PATH=$SI FAKE_CUDA_DEVICES=2 FAKE_NCCL_LOG=$o.log \
        timeout 120 "$AMLRUN" --nproc-per-node 2 --master-port $((20000 + RANDOM % 10000)) --cpu-bind none "$EX" \
        >"$o" 2>"$o.err"
    st=$?
    expect_eq "nccl_allreduce on the stand-ins under amlrun: exit 0" "$st" 0
    expect_eq "nccl_allreduce: two ranks print all_reduce([1]) = [2]" \
        "$(grep -c 'all_reduce(\[1\]) = \[2\]' "$o")" 2
    expect_eq "nccl_allreduce: both ranks joined one id, nranks=2" \
        "$(sed -n 's/.* nranks=\([0-9]*\) .* id=\([0-9a-f]*\) .*/\1 \2/p' "$o.log" 2>/dev/null | sort -u | wc -l):$(wc -l <"$o.log" 2>/dev/null)" "1:2"
    expect_eq "nccl_allreduce: ranks 0 and 1 on devices 0 and 1" \
        "$(sed -n 's/.*init rank=\([0-9]\) nranks=2 device=\([0-9]\) .*/\1 \2/p' "$o.log" 2>/dev/null | sort | tr '\n' ,)" "0 0,1 1,"
    [ "$st" = 0 ] || { diag "stderr:"; sed 's/^/#   /' "$o.err"; }
else
    skip "nccl_allreduce on the stand-ins" "examples/nccl_allreduce not built"
fi

# --- the stand-ins under valgrind and ASan+UBSan ----------------------------
if have valgrind; then
    VG="valgrind -q --error-exitcode=99 --read-inline-info=no --leak-check=full --errors-for-leak-kinds=definite"
    o=$TEST_TMP/vg
    FAKE_CUDA_DEVICES=3 FAKE_CUDA_BUSIDS=0000:00:06.0,0000:1A:00.0 \
        FAKE_CUDA_MEM_FREE=1M timeout 300 $VG "$DRV" units >"$o" 2>&1
    expect_eq "valgrind: units clean" "$?" 0
    FAKE_CUDA_DEVICES=2 ranks 2 "$o" $VG "$DRV" collectives
    expect_eq "valgrind: 2 ranks of collectives clean" \
        "$(rc "$o.0"):$(rc "$o.1")" "0:0"
else
    skip "valgrind" "not installed"
fi

asan=$TEST_TMP/asan
if make -s -C "$TOP" BUILD="$asan" SAN=1 "$asan/tests/standin/standin_driver" \
    >"$asan.log" 2>&1; then
    o=$TEST_TMP/asan-run
    export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
    FAKE_CUDA_DEVICES=3 FAKE_CUDA_BUSIDS=0000:00:06.0,0000:1A:00.0 \
        FAKE_CUDA_MEM_FREE=1M timeout 120 "$asan/tests/standin/standin_driver" \
        units >"$o" 2>&1
    expect_eq "ASan+UBSan: units clean" "$?" 0
    FAKE_CUDA_DEVICES=3 ranks 3 "$o" "$asan/tests/standin/standin_driver" collectives
    expect_eq "ASan+UBSan: 3 ranks of collectives clean" \
        "$(rc "$o.0"):$(rc "$o.1"):$(rc "$o.2")" "0:0:0"
    unset ASAN_OPTIONS UBSAN_OPTIONS
else
    fail "ASan+UBSan build of the stand-ins"
    sed 's/^/#   /' "$asan.log" | tail -20
fi
expect_eq "nothing written to TMPDIR when FAKE_NCCL_DIR is set" \
    "$(find "$TMPDIR" -mindepth 1 | wc -l)" 0
