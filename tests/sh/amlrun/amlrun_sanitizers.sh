#!/usr/bin/env bash
# amlrun itself under valgrind (not its workers: --trace-children=no) and
# built with ASan+UBSan: a normal job with prefixes, logs and a filter, a
# failing job with a restart, a job stopped by SIGTERM, a dry run, a
# usage error, a missing command, a console that goes away, a log file
# over `ulimit -f`, and a job asked --status and --stacks while it runs.
# Any error or definite leak fails.
# amldist-test: slow, after asan-build (one of the longest: tests/run.sh
# starts it early, once the ASan pass's make, which builds its amlrun, is done)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
d=$TEST_TMP/san
mkdir -p "$d"
echo "echo hi" >"$d/plain"; chmod 644 "$d/plain"

# jobs RUNNER...: run the cases with RUNNER prefixed to amlrun; each case
# must end with the status the plain amlrun gives.
jobs() {
    local label=$1; shift
    rm -rf "$d/logs"
    "$@" --nproc-per-node 3 --prefix --log-dir "$d/logs" --ranks 0,1 \
        sh -c 'echo out $RANK; echo err $RANK >&2' >"$d/o" 2>"$d/e"
    expect_eq "$label: normal job" "$?" 0
    # rank 1 fails later (stopped by then): two ranks that fail at once may
    # end either way, and an instrumented amlrun is slow enough to see it
    "$@" --nproc-per-node 2 --max-restarts 1 \
        sh -c '[ "$RANK" = 1 ] && sleep 30; exit $((RANK + 3))' >"$d/o" 2>"$d/e"
    expect_eq "$label: failing job with a restart" "$?" 3
    "$@" --nproc-per-node 2 sh -c 'kill -TERM $PPID; exec sleep 30' >"$d/o" 2>"$d/e"
    expect_eq "$label: SIGTERM to amlrun" "$?" 143
    "$@" --dry-run --nproc-per-node 2 --legacy-launch x.py >"$d/o" 2>"$d/e"
    expect_eq "$label: dry run" "$?" 0
    "$@" --nproc-per-node 2 --bogus >"$d/o" 2>"$d/e"
    expect_eq "$label: usage error" "$?" 2
    "$@" --ma 1 --tag-output x >"$d/o" 2>"$d/e"
    expect_eq "$label: ambiguous prefix" "$?" 2
    "$@" --nproc_per_nodes 2 x >"$d/o" 2>"$d/e"
    expect_eq "$label: did you mean" "$?" 2
    "$@" --version -v >"$d/o" 2>"$d/e"
    expect_eq "$label: --version -v (NCCL, CUDA, PMIx loaded)" "$?" 0
    "$@" --nproc 2 no-such-script.py >"$d/o" 2>"$d/e"
    expect_eq "$label: missing .py" "$?" 127
    "$@" --nproc-per-node 2 ./no-such-program >"$d/o" 2>"$d/e"
    expect_eq "$label: missing command" "$?" 127
    "$@" --nproc-per-node 2 --no-python "$d/plain" >"$d/o" 2>"$d/e"
    expect_eq "$label: command not executable" "$?" 126
    # a failing rank off the console: its lines quoted, its log file named
    "$@" --nproc-per-node 2 --ranks 0 --log-dir "$d/logs" \
        sh -c 'echo "err $RANK" >&2; exit $((RANK * 5))' >"$d/o" 2>"$d/e"
    expect_eq "$label: failing rank off the console" "$?" 5
    # torchrun 2.x's localhost:0 (c10d, one node)
    "$@" --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint localhost:0 \
        true >"$d/o" 2>"$d/e"
    expect_eq "$label: c10d localhost:0" "$?" 0
    # the output fault paths: a console gone, a log over `ulimit -f`
    "$@" --nproc-per-node 2 --prefix --log-dir "$d/logs" \
        perl -e '$SIG{PIPE} = "DEFAULT"; exec "yes"' 2>"$d/e" | head -n 1 >/dev/null
    expect_eq "$label: console gone (yes | head -1)" "${PIPESTATUS[0]}" 141
    ( ulimit -f 16; "$@" --nproc-per-node 2 --log-dir "$d/logs" \
        head -c 100000 /dev/zero >/dev/null 2>"$d/e" )
    expect_eq "$label: log over ulimit -f" "$?" 0
    # a job asked while it runs: the supervisor's query socket and answer,
    # and the asking amlrun itself (--status, =json, --stacks, a stale
    # socket, no such job)
    rm -f "$d"/up.* "$d/down"
    "$@" --nproc-per-node 2 --run-id "san-status-$$" sh -c \
        'touch "$0/up.$RANK"; while [ ! -e "$0/down" ]; do sleep 0.05; done' \
        "$d" >"$d/o" 2>"$d/e" &
    local job=$!
    if wait_for 2 120 "$d" up.; then
        "$@" --status "san-status-$$" >"$d/so" 2>"$d/se"
        expect_eq "$label: --status of a running job" "$?" 0
        "$@" --status=json "$job" >"$d/so" 2>"$d/se"
        expect_eq "$label: --status=json of a running job" "$?" 0
        "$@" --stacks "san-status-$$" >"$d/so" 2>"$d/se"
        expect_eq "$label: --stacks of a running job" "$?" 0
        "$@" --status "san-none-$$" >"$d/so" 2>"$d/se"
        expect_eq "$label: --status of no such job" "$?" 1
    else
        fail "$label: the job to ask did not start"
    fi
    touch "$d/down"
    wait "$job"
    expect_eq "$label: the job asked ends normally" "$?" 0
}

if have valgrind; then
    # (--read-inline-info=no: the same errors, their stacks without inlined
    # functions' frames; reading those was a quarter of each amlrun's start)
    jobs "valgrind" valgrind -q --error-exitcode=99 --read-inline-info=no --leak-check=full \
        --errors-for-leak-kinds=definite --trace-children=no "$AMLRUN"
else
    skip "valgrind" "valgrind not installed"
fi

ASAN_TOP=$TOP/build-asan
if [ "${AMLDIST_QUICK:-0}" = 1 ] && [ ! -x "$ASAN_TOP/bin/amlrun" ]; then
    skip "ASan amlrun" "AMLDIST_QUICK=1 and no build-asan/bin/amlrun"
elif tmake BUILD=build-asan SAN=1 build-asan/bin/amlrun >"$d/build" 2>&1; then
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1:exitcode=99
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    jobs "ASan+UBSan" "$ASAN_TOP/bin/amlrun"
    unset ASAN_OPTIONS UBSAN_OPTIONS
else
    fail "ASan build of amlrun"; sed 's/^/# /' "$d/build" | tail -n 20
fi
