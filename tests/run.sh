#!/usr/bin/env bash
# Runs the whole suite, JOBS test programs at a time, and ends with one line
# "N passed, N failed".  The programs:
#   unit tests (build/tests/test_*): plain, with ASan+UBSan (build-asan, which
#   the job "asan-build" makes first), and under valgrind;
#   shell tests (tests/sh/<component>/*.sh): real mpirun, PyTorch, namespaces;
#   a shell test marked "# amldist-test: etcd" once more as NAME@etcd, with
#   RZ_BACKEND=etcd (the rendezvous tests on the etcd backend);
#   fuzz targets (tests/fuzz/*.c): libFuzzer for AMLDIST_FUZZ_SECONDS each,
#   built by the job "fuzz-build" first.
# Most programs wait rather than compute (daemons, timeouts, peers), so they
# run side by side; a shell test with the line "# amldist-test: alone" runs
# with nothing beside it.  Each program's lines are kept until it ends and
# printed together.  Every program runs under a timeout; one that dies
# without reporting counts as a failed case.  The longest start first, by
# the durations of the last run ($BUILD/test-durations) or, on a fresh
# checkout, by "# amldist-test: slow" lines and the kind of program.
# Environment: BUILD (default build), JOBS (default twice the CPUs, at least
# 4), AMLDIST_QUICK=1 leaves out the sanitizer, valgrind and fuzz programs,
# TESTS="PATTERN..." picks programs by label ('slurm*', 'test_rdzv asan:*').
set -u
cd "$(dirname "$0")/.." || exit 2
BUILD=${BUILD:-build}
case $BUILD in /*) BUILD_ABS=$BUILD ;; *) BUILD_ABS=$PWD/$BUILD ;; esac
QUICK=${AMLDIST_QUICK:-0}
# 8 s each, from the kept corpora (tests/fuzz/corpus/*.hex), which start
# every target where 15 s from the hand-written seeds ended, or beyond.
FUZZ_SECONDS=${AMLDIST_FUZZ_SECONDS:-8}
# The CPUs this suite may use: nproc honours OMP_NUM_THREADS too, which an
# HPC shell often exports as 1, and the suite would run one job at a time.
ncpu=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || echo 2)
JOBS=${JOBS:-$((ncpu * 2 > 4 ? ncpu * 2 : 4))}
[ "$JOBS" -ge 1 ] 2>/dev/null || { echo "tests/run.sh: JOBS=$JOBS is not a number >= 1" >&2; exit 2; }
log=$(mktemp -d "${TMPDIR:-/tmp}/amldist-run.XXXXXX")
# The tests check the Makefile's own install locations and install into
# DESTDIRs of their own: locations in the caller's environment, which the
# Makefile takes (PREFIX ?= ...), would move them (perf record exports
# PREFIX=/usr to what it runs; Termux sets PREFIX in every shell).
unset PREFIX DESTDIR LIBDIR BINDIR INCDIR MANDIR PKGDIR PYTHONDIR
DURATIONS=$BUILD/test-durations

# A python3 first in PATH that is a version manager's shim (pyenv's is a
# bash script that asks pyenv which Python to run: 0.1 s of CPU a call,
# against 0.01 s for the interpreter) is replaced, for the tests, by a link
# to the interpreter it chooses now: the same Python, without the detour at
# each of the suite's thousands of calls.
py=$(command -v python3 2>/dev/null)
if [ -n "$py" ] && ! head -c 4 "$py" 2>/dev/null | grep -q 'ELF'; then
    real=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)
    if [ -x "$real" ] && [ "$real" != "$py" ]; then
        mkdir -p "$log/bin" && ln -s "$real" "$log/bin/python3" && PATH=$log/bin:$PATH
    fi
fi

# ---- the programs ------------------------------------------------------------
# Job i: LABEL, LIMIT (s, for timeout), ALONE (0/1), AFTER (the label of a
# job that must pass first), EST (expected seconds, for the order), CMD
# (words quoted for eval).
LABEL=() LIMIT=() ALONE=() AFTER=() EST=() CMD=()
declare -A LAST=()
if [ -r "$DURATIONS" ]; then
    while read -r secs name; do LAST[$name]=$secs; done <"$DURATIONS"
fi

# add LABEL LIMIT EST ALONE AFTER CMD...
add() {
    local i=${#LABEL[@]}
    LABEL[i]=$1 LIMIT[i]=$2 EST[i]=${LAST[$1]:-$3} ALONE[i]=$4 AFTER[i]=$5
    shift 5
    CMD[i]=$(printf '%q ' "$@")
}

# marked SCRIPT WORD: the script has a line "# amldist-test: ... WORD ...".
marked() { grep -Eq "^# amldist-test:.*\\b$2\\b" "$1"; }

# add_unit PASS LIMIT EST AFTER PROGRAM [WRAPPER...]: one pass of a unit test
# program, in the shards its source asks for with "amldist-test: shards N"
# (TEST_SHARD=i/N runs every N-th case from the i-th: tests/unit/test.h).
# A source marked "amldist-test: slow" (its cases wait out timeouts) starts
# early in every pass, not among the quick ones at the end.
add_unit() {
    local pass=$1 limit=$2 est=$3 after=$4 t=$5 name n k
    shift 5
    name=$(basename "$t")
    n=$(sed -n 's/.*amldist-test: shards \([0-9]*\).*/\1/p' tests/unit/*/"$name.c" 2>/dev/null | head -n 1)
    grep -q 'amldist-test: slow' tests/unit/*/"$name.c" 2>/dev/null && est=100
    if [ "${n:-1}" -le 1 ]; then
        add "$pass$name" "$limit" "$est" 0 "$after" "$@" "$t"
        return
    fi
    # (asking for shards says it is slow: start those first)
    for ((k = 0; k < n; k++)); do
        add "${pass}${name}[$k/$n]" "$limit" 100 0 "$after" env "TEST_SHARD=$k/$n" "$@" "$t"
    done
}

for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] && add_unit "" 300 2 "" "$t"
done
for t in tests/sh/*/*.sh; do
    [ -f "$t" ] || continue
    est=20 alone=0 after=
    marked "$t" slow && est=100
    marked "$t" alone && alone=1
    # a test that builds into build-asan itself waits for that pass's make
    [ "$QUICK" != 1 ] && marked "$t" asan-build && after=asan-build
    add "$(basename "$t" .sh)" 900 "$est" "$alone" "$after" env BUILD="$BUILD_ABS" bash "$t"
    # a rendezvous test marked "etcd" runs again on the etcd backend
    # (tests/amlrun/rdzv.sh's RZ_BACKEND), as NAME@etcd
    marked "$t" etcd && add "$(basename "$t" .sh)@etcd" 900 "$est" "$alone" "$after" \
        env BUILD="$BUILD_ABS" RZ_BACKEND=etcd bash "$t"
done
if [ "$QUICK" != 1 ]; then
    # (unit-tests: the unit tests and what they load, not the stand-ins)
    add asan-build 900 120 0 "" make -s -j"$ncpu" BUILD=build-asan SAN=1 unit-tests
    for t in "$BUILD"/tests/test_*; do
        [ -x "$t" ] || continue
        add_unit asan: 600 5 asan-build "build-asan/tests/$(basename "$t")" env \
            ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1 \
            UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    done
    # Valgrind follows the programs' children (a test run again by
    # posix_spawn, forks) but not the system's programs the tests start
    # (sh and rm from system(), python3, cat, ls): they are none of ours,
    # and each costs seconds on valgrind's machine.  --read-inline-info=no:
    # the same errors found, their stacks without the frames of inlined
    # functions (a quarter of a small test's time under valgrind went to
    # reading them, at every start of a program).
    for t in "$BUILD"/tests/test_*; do
        [ -x "$t" ] || continue
        add_unit valgrind: 900 30 "" "$t" valgrind -q --error-exitcode=99 --read-inline-info=no \
            --leak-check=full --errors-for-leak-kinds=definite --trace-children=yes \
            --trace-children-skip='/bin/*,/usr/bin/*,/sbin/*,/usr/sbin/*' \
            --child-silent-after-fork=no
    done
    # the library's fuzzer objects, once for every target (the Makefile's fuzz)
    add fuzz-build 900 60 0 "" make -s -j"$ncpu" fuzz
    for f in tests/fuzz/fuzz_*.c; do
        [ -f "$f" ] || continue
        name=$(basename "$f" .c)
        add "$name" $((FUZZ_SECONDS + 300)) $((FUZZ_SECONDS + 60)) 0 fuzz-build \
            tests/fuzz/run.sh "$name" "$FUZZ_SECONDS"
    done
fi

# TESTS picks programs by label (a shell test's is its name without .sh;
# several patterns apart with spaces), with the programs they need first.
declare -A PICK=()
set -f      # the patterns are for case, not for the file names here
for i in "${!LABEL[@]}"; do
    for pat in ${TESTS:-*}; do
        # shellcheck disable=SC2254
        case ${LABEL[i]} in $pat) PICK[${LABEL[i]}]=1; [ -n "${AFTER[i]}" ] && PICK[${AFTER[i]}]=1 ;; esac
    done
done
set +f
# The order: the programs that run alone first (nothing else is running
# then), the rest longest first, so that no long one starts near the end.
mapfile -t ORDER < <(for i in "${!LABEL[@]}"; do
    [ -n "${PICK[${LABEL[i]}]:-}" ] && printf '%d %d %d\n' $((1 - ALONE[i])) "${EST[i]}" "$i"
done | sort -k1,1n -k2,2nr | cut -d' ' -f3)

# ---- running them ------------------------------------------------------------
pass=0 failed=0 skipped=0
failures=() times=() cpus=() beside=()
declare -A RETRIED=()
declare -A RUNNING=() STATE=()   # RUNNING[i]=start time; STATE[label]=pass|fail

# Each program gets a network namespace of its own, with only loopback, where
# this machine lets us make one: ports the tests take (MASTER_PORT's 29500 by
# default, fixed ones in the unit tests) cannot meet those of the programs
# beside them, or of another suite on this machine.  The namespace clusters
# the tests make (scripts/netns-cluster.sh) hang off it like off the host's.
ISOLATE=()
if unshare --net -- sh -c 'ip link set lo up' 2>/dev/null; then
    ISOLATE=(unshare --net -- sh -c 'ip link set lo up && exec "$@"' isolated)
fi

# start I: job I in the background, its output in $log/I.{out,err}, its exit
# status in $log/I.rc; when it ends, its number goes down the pipe $log/done,
# which the loop below reads.  timeout puts the program in a process group of
# its own and takes the whole group down.
start() {
    local i=$1
    (
        eval "set -- ${CMD[i]}"
        exec 3>&-
        timeout --kill-after=10 "${LIMIT[i]}" "${ISOLATE[@]}" "$@" >"$log/$i.out" 2>"$log/$i.err" </dev/null &
        echo $! >"$log/$i.pid"
        wait $!
        rc=$?
        # CPU seconds of the program and everything it waited for (bash's
        # times: the second line is the children's user and system time)
        # (into a file first: times in a pipe would be a child's)
        times >"$log/$i.cpu"
        awk 'NR == 2 { gsub(/[ms]/, " "); print $1 * 60 + $2 + $3 * 60 + $4 }' "$log/$i.cpu" >"$log/$i.cpu2"
        mv "$log/$i.cpu2" "$log/$i.cpu"
        echo $rc >"$log/$i.rc"
        echo "$i" >"$log/done"
    ) &
    RUNNING[$i]=${EPOCHREALTIME/./}
}

# finish I: count and print job I's result lines, all together.
finish() {
    local i=$1 label=${LABEL[$1]} out="$log/$1.out" rc p f s secs at
    rc=$(cat "$log/$i.rc")
    secs=$(((${EPOCHREALTIME/./} - RUNNING[$i] + 500000) / 1000000))
    at=$(((RUNNING[$i] - T0 + 500000) / 1000000))
    unset "RUNNING[$i]"
    p=$(grep -c '^ok - ' "$out")
    s=$(grep -c '^ok - .*# SKIP' "$out")
    f=$(grep -c '^not ok - ' "$out")
    p=$((p - s))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
        echo "not ok - $label: exited with status $rc$([ "$rc" -eq 124 ] && echo ' (timeout)')" >>"$out"
    fi
    # A program that failed beside others runs once more, alone, and that
    # run counts.  Its first failure stays in the log and in the list at the
    # end, so that a case a loaded machine breaks is seen, not hidden.
    if [ "$f" -gt 0 ] && [ "$JOBS" -gt 1 ] && [ "${ALONE[i]}" != 1 ] && [ -z "${RETRIED[$i]:-}" ]; then
        RETRIED[$i]=1
        ALONE[i]=1
        echo "== $label ($secs s): failed beside other programs; it runs again alone"
        # each failed case with the diagnostics that follow it
        # (a check's diagnostics may come before its line: the last 10 kept)
        awk -v l="$label" '
            /^#/ { if (p) print "#   " $0; else { b[n++ % 10] = $0 }; next }
            /^not ok - / { for (k = (n > 10 ? n - 10 : 0); k < n; k++) print "#   " b[k % 10]
                           n = 0; p = 1; sub(/^not ok - /, "# beside others: not ok - [" l "] "); print; next }
            { p = 0; n = 0 }' "$out"
        sed 's/^/#   /' "$log/$i.err" | tail -n 20
        while IFS= read -r line; do beside+=("$line"); done < <(grep '^not ok' "$out" | sed "s|^not ok - |[$label] |")
        ORDER+=("$i")
        return
    fi
    echo "== $label ($secs s from +$at s, $(cat "$log/$i.cpu" 2>/dev/null || echo '?') s CPU)"
    sed -e "s|^\(not ok - \)|\1[$label] |" -e "s|^\(ok - \)|\1[$label] |" "$out"
    if [ "$f" -gt 0 ]; then
        sed 's/^/#   /' "$log/$i.err" | tail -n 40
        while IFS= read -r line; do failures+=("$line"); done < <(grep '^not ok' "$out" | sed "s|^not ok - |[$label] |")
        STATE[$label]=fail
    else
        STATE[$label]=pass
    fi
    times+=("$secs $label")
    cpus+=("$(cat "$log/$i.cpu" 2>/dev/null || echo 0) $label")
    pass=$((pass + p)); failed=$((failed + f)); skipped=$((skipped + s))
}

# On SIGINT or SIGTERM, stop every running program (its timeout's process
# group) before leaving.
stop_all() {
    local i
    stop_ticker
    for i in "${!RUNNING[@]}"; do
        [ -s "$log/$i.pid" ] && kill -TERM "$(cat "$log/$i.pid")" 2>/dev/null
    done
    wait
}
trap 'stop_all; rm -rf "$log"; exit 130' INT
trap 'stop_all; rm -rf "$log"; exit 143' TERM
TICKER=
stop_ticker() { [ -z "$TICKER" ] || kill "$TICKER" 2>/dev/null; TICKER=; }
trap 'stop_ticker; rm -rf "$log"' EXIT

T0=${EPOCHREALTIME/./}
# The machine's busy and idle time (/proc/stat, in clock ticks), for the
# line at the end: per-program figures miss what a program did not wait
# for (daemons, the namespace clusters' processes).
cpu_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat 2>/dev/null; }
read -r BUSY0 IDLE0 < <(cpu_ticks)
mkfifo "$log/done"
exec 3<>"$log/done"     # read and write: the loop never sees end-of-file
echo "# ${#ORDER[@]} test programs, $JOBS at a time ($ncpu CPUs$([ "$JOBS" -gt 1 ] && echo '; more while the CPUs idle'))$([ ${#ISOLATE[@]} -gt 0 ] && echo ', each in a network namespace of its own')"
alone_running=0
# Programs that mostly wait (the valgrind passes' scaled timeouts, a
# cluster's daemons) leave the CPUs idle with JOBS of them running.  Every
# 2 s, the CPUs' idle share since the last look decides whether one more
# may run (over a quarter idle; two more over 60 %) or one fewer (under a
# tenth), between JOBS and five times JOBS.  At twice JOBS, and at one
# more only over half idle, fresh clones' runs left the CPUs 20 % and then
# 40 % idle for minutes while the valgrind and ASan shards of test_rdzv
# waited out their scaled timeouts; at three times, 20 % idle for the
# two minutes the twelve of them (60 to 150 s each, 5 s of CPU) filled
# every place.  Nine times was tried: no less idle (83 % busy against 89),
# and more programs failing beside the others, run again alone.  JOBS=1 stays one at a time.
# The looks come as "tick" lines in the jobs' pipe, so that every read is
# a whole line (a read -t that times out mid-line keeps half a job number
# and loses the rest).
extra=0
read -r LOOK_BUSY LOOK_IDLE < <(cpu_ticks)
(exec 3>&-; while sleep 2; do echo tick; done) >"$log/done" &
TICKER=$!
look() {
    local busy idle db di
    read -r busy idle < <(cpu_ticks) || return
    db=$((busy - LOOK_BUSY)) di=$((idle - LOOK_IDLE))
    LOOK_BUSY=$busy LOOK_IDLE=$idle
    [ $((db + di)) -gt 0 ] || return
    if [ $((di * 4)) -gt $((db + di)) ] && [ "$JOBS" -gt 1 ] && [ "$extra" -lt $((4 * JOBS)) ]; then
        extra=$((extra + 1))
        # mostly idle: two at a time (the shards that wait start together)
        if [ $((di * 10)) -gt $(((db + di) * 6)) ] && [ "$extra" -lt $((4 * JOBS)) ]; then
            extra=$((extra + 1))
        fi
    elif [ $((di * 10)) -lt $((db + di)) ] && [ "$extra" -gt 0 ]; then
        extra=$((extra - 1))
    fi
}
while [ "${#ORDER[@]}" -gt 0 ] || [ "${#RUNNING[@]}" -gt 0 ]; do
    # Start what may start, in order; a program that must run alone waits
    # until the others are done, and nothing starts beside it.
    rest=()
    for i in "${ORDER[@]}"; do
        dep=${AFTER[i]}
        if [ -n "$dep" ] && [ "${STATE[$dep]:-}" = fail ]; then
            continue    # its prerequisite failed, and was counted
        elif [ "$alone_running" = 1 ] || [ "${#RUNNING[@]}" -ge $((JOBS + extra)) ] ||
             { [ -n "$dep" ] && [ -z "${STATE[$dep]:-}" ]; } ||
             { [ "${ALONE[i]}" = 1 ] && [ "${#RUNNING[@]}" -gt 0 ]; }; then
            rest+=("$i")
        else
            start "$i"
            [ "${ALONE[i]}" = 1 ] && alone_running=1
        fi
    done
    ORDER=("${rest[@]}")
    [ "${#RUNNING[@]}" -gt 0 ] || break
    read -r i <&3
    if [ "$i" = tick ]; then
        look
        continue
    fi
    finish "$i"
    [ "${ALONE[i]}" = 1 ] && alone_running=0
done
stop_ticker
wait

# The durations, for the order of the next run (kept for the programs that
# did not run this time).
for t in "${times[@]}"; do LAST[${t#* }]=${t%% *}; done
for l in "${!LAST[@]}"; do echo "${LAST[$l]} $l"; done >"$DURATIONS" 2>/dev/null
printf '%s\n' "${cpus[@]}" >"$BUILD/test-cpu" 2>/dev/null
echo
if [ "${#times[@]}" -gt 0 ]; then
    echo "Slowest:"
    printf '%s\n' "${times[@]}" | sort -rn | head -n 10 | awk '{ printf "  %5d s  %s\n", $1, $2 }'
fi
if [ "${#cpus[@]}" -gt 0 ]; then
    echo "Most CPU (user + system, with the processes each waited for):"
    printf '%s\n' "${cpus[@]}" | sort -rn | head -n 10 | awk '{ printf "  %7.1f s  %s\n", $1, $2 }'
    printf '%s\n' "${cpus[@]}" | awk '{ s += $1 } END { printf "  %7.1f s  in all\n", s }'
fi
if read -r busy idle < <(cpu_ticks) && [ -n "${BUSY0:-}" ]; then
    hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
    awk -v b=$((busy - BUSY0)) -v i=$((idle - IDLE0)) -v hz="$hz" -v n="$ncpu" 'BEGIN {
        if (b + i > 0) printf "The machine: %.0f s of CPU busy, %.0f s idle (%d CPUs, %.0f%% busy)\n", b / hz, i / hz, n, 100 * b / (b + i) }'
fi
if [ "${#beside[@]}" -gt 0 ]; then
    echo "Failed beside other programs, then run again alone (the second run counts):"
    printf '  %s\n' "${beside[@]}"
fi
if [ "${#failures[@]}" -gt 0 ]; then
    echo "Failed:"
    printf '  %s\n' "${failures[@]}"
fi
[ "$skipped" -gt 0 ] && echo "($skipped skipped, not counted)"
echo "$pass passed, $failed failed"
[ "$failed" -eq 0 ]
