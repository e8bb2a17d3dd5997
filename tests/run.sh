#!/usr/bin/env bash
# Runs the whole suite and ends with one line "N passed, N failed".
#   unit tests (build/tests/test_*): plain, then ASan+UBSan, then valgrind;
#   shell tests (tests/sh/<component>/*.sh): real mpirun, PyTorch, namespaces, man pages;
#   fuzz targets (tests/fuzz/*.c): libFuzzer for AMLDIST_FUZZ_SECONDS each.
# Every program runs under a timeout; one that dies without reporting counts
# as a failed case.  Environment: BUILD (default build), AMLDIST_QUICK=1 skips
# the sanitizer, valgrind and fuzz passes, TESTS="pattern" picks shell tests.
set -u
cd "$(dirname "$0")/.."
TOP=$PWD
BUILD=${BUILD:-build}
QUICK=${AMLDIST_QUICK:-0}
FUZZ_SECONDS=${AMLDIST_FUZZ_SECONDS:-15}
pass=0 failed=0 skipped=0
failures=()
log=$(mktemp -d /tmp/amldist-run.XXXXXX)
trap 'rm -rf "$log"' EXIT

# run_case LABEL TIMEOUT CMD...: run one test program, count its result lines.
run_case() {
    local label=$1 limit=$2; shift 2
    local out="$log/out" rc=0
    timeout --kill-after=10 "$limit" "$@" >"$out" 2>"$log/err" </dev/null || rc=$?
    local p f s
    p=$(grep -c '^ok - ' "$out")
    s=$(grep -c '^ok - .*# SKIP' "$out")
    f=$(grep -c '^not ok - ' "$out")
    p=$((p - s))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
        echo "not ok - $label: exited with status $rc$([ "$rc" -eq 124 ] && echo ' (timeout)')" >>"$out"
    fi
    sed -e "s|^\(not ok - \)|\1[$label] |" -e "s|^\(ok - \)|\1[$label] |" "$out"
    if [ "$f" -gt 0 ]; then
        sed 's/^/#   /' "$log/err" | tail -n 40
        while IFS= read -r line; do failures+=("$line"); done < <(grep '^not ok' "$out" | sed "s|^not ok - |[$label] |")
    fi
    pass=$((pass + p)); failed=$((failed + f)); skipped=$((skipped + s))
}

echo "== unit tests ($BUILD)"
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] && run_case "$(basename "$t")" 300 "$t"
done

if [ "$QUICK" != 1 ]; then
    echo "== unit tests under ASan+UBSan (build-asan)"
    if make -s BUILD=build-asan SAN=1 tests >"$log/asan-build" 2>&1; then
        export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1
        export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
        for t in build-asan/tests/test_*; do
            [ -x "$t" ] && run_case "asan:$(basename "$t")" 600 "$t"
        done
        unset ASAN_OPTIONS UBSAN_OPTIONS
    else
        cat "$log/asan-build"; failed=$((failed + 1)); failures+=("ASan build failed")
    fi

    echo "== unit tests under valgrind"
    if command -v valgrind >/dev/null; then
        for t in "$BUILD"/tests/test_*; do
            [ -x "$t" ] || continue
            run_case "valgrind:$(basename "$t")" 900 valgrind -q --error-exitcode=99 \
                --leak-check=full --errors-for-leak-kinds=definite --trace-children=yes \
                --child-silent-after-fork=no "$t"
        done
    else
        echo "not ok - valgrind missing"; failed=$((failed + 1))
    fi
fi

echo "== shell tests"
for t in tests/sh/*/*.sh; do
    [ -f "$t" ] || continue
    case "$(basename "$t")" in ${TESTS:-*}) ;; *) continue ;; esac
    run_case "$(basename "$t" .sh)" 900 env BUILD="$TOP/$BUILD" bash "$t"
done

if [ "$QUICK" != 1 ]; then
    echo "== fuzzing ($FUZZ_SECONDS s per target)"
    for f in tests/fuzz/fuzz_*.c; do
        [ -f "$f" ] || continue
        name=$(basename "$f" .c)
        run_case "$name" $((FUZZ_SECONDS + 300)) tests/fuzz/run.sh "$name" "$FUZZ_SECONDS"
    done
fi

echo
if [ "${#failures[@]}" -gt 0 ]; then
    echo "Failed:"
    printf '  %s\n' "${failures[@]}"
fi
[ "$skipped" -gt 0 ] && echo "($skipped skipped, not counted)"
echo "$pass passed, $failed failed"
[ "$failed" -eq 0 ]
