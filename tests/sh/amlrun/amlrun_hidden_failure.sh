#!/usr/bin/env bash
# A failing rank whose output the console does not show (--ranks 0, the man
# page's example; -r, torchrun's redirects): the one-node summary quotes its
# last stderr and stdout lines, as the multi-node summary does, and names
# the log file that holds all of it (--log-dir in amlrun's layout, torchrun's
# attempt_0/<local>/stderr.log), or says none was kept.  A rank the console
# shows is not quoted twice.  Shell and Python workers.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
d=$TEST_TMP
export TMPDIR=$d/tmp
mkdir -p "$TMPDIR"
A=("$AMLRUN" --cpu-bind none --nproc-per-node 2)
# rank 1 fails once rank 0 has started, after some lines of its own
sh_worker='echo "out of $RANK"; for i in 1 2 3; do echo "err $i of $RANK" >&2; done
[ "$RANK" = 1 ] && { echo "fatal: rank 1 gives up" >&2; exit 7; }; sleep 30'

# quoted NAME FILE STREAM LINE: FILE's summary quotes LINE under STREAM.
quoted() {
    if sed -n "/^amlrun:   last lines of its $3:\$/,/^amlrun:   [^|]/p" "$2" |
        grep -qxF "amlrun:   | $4"; then ok "$1"
    else fail "$1"; sed 's/^/#   /' "$2"; fi
}

# --- --ranks 0, no log files: the lines, and that no more was kept
"${A[@]}" --ranks 0 sh -c "$sh_worker" >"$d/o" 2>"$d/e"
expect_eq "--ranks 0, shell: exit 7" "$?" 7
check "--ranks 0: rank 1's lines are not on the console" sh -c '! grep -q "of 1" "$1"' sh "$d/o"
quoted "--ranks 0: the summary quotes rank 1's last stderr line" "$d/e" stderr "fatal: rank 1 gives up"
quoted "--ranks 0: and the lines before it" "$d/e" stderr "err 3 of 1"
quoted "--ranks 0: and its stdout" "$d/e" stdout "out of 1"
check "--ranks 0: says that no more was kept" \
    grep -q '^amlrun:   (no more of its stderr was kept: --log-dir DIR keeps all of it)$' "$d/e"
check "--ranks 0: rank 0's lines are not quoted" sh -c '! grep -q "| .* of 0" "$1"' sh "$d/e"

# --- --ranks 0 --log-dir: the file that holds the rest
"${A[@]}" --ranks 0 --log-dir "$d/logs" sh -c "$sh_worker" >"$d/o" 2>"$d/e"
expect_eq "--ranks 0 --log-dir: exit 7" "$?" 7
quoted "--ranks 0 --log-dir: quotes the last line" "$d/e" stderr "fatal: rank 1 gives up"
f=$(sed -n 's/^amlrun:   all of its stderr: //p' "$d/e")
expect_eq "--ranks 0 --log-dir: names rank 1's stderr file" "$f" "$d/logs/rank1.stderr"
check "--ranks 0 --log-dir: that file holds all of it" grep -q "err 1 of 1" "$f"

# --- -r 3 (torchrun's layout, a private directory kept for the logs)
"${A[@]}" -r 3 sh -c "$sh_worker" >"$d/o" 2>"$d/e"
expect_eq "-r 3: exit 7" "$?" 7
expect_eq "-r 3: nothing of the workers on the console" "$(cat "$d/o")" ""
quoted "-r 3: quotes rank 1's last stderr line" "$d/e" stderr "fatal: rank 1 gives up"
f=$(sed -n 's/^amlrun:   all of its stderr: //p' "$d/e")
case $f in "$TMPDIR"/amlrun_*/none_*/attempt_0/1/stderr.log) ok "-r 3: names torchrun's attempt_0/1/stderr.log" ;;
*) fail "-r 3: names torchrun's attempt_0/1/stderr.log"; diag "$f" ;; esac
check "-r 3: the file it names is there, with all of it" grep -q "err 1 of 1" "$f"

# --- -r 2 --log-dir: stdout stays on the console, so only stderr is quoted
"${A[@]}" -r 2 --log-dir "$d/tl" sh -c "$sh_worker" >"$d/o" 2>"$d/e"
expect_eq "-r 2 --log-dir: exit 7" "$?" 7
quoted "-r 2 --log-dir: quotes the stderr" "$d/e" stderr "fatal: rank 1 gives up"
check "-r 2 --log-dir: the stdout, shown, is not quoted" \
    sh -c '! grep -q "last lines of its stdout" "$1"' sh "$d/e"
f=$(sed -n 's/^amlrun:   all of its stderr: //p' "$d/e")
case $f in "$d"/tl/none_*/attempt_0/1/stderr.log) ok "-r 2 --log-dir: names the file under --log-dir" ;;
*) fail "-r 2 --log-dir: names the file under --log-dir"; diag "$f" ;; esac

# --- torchrun's layout without -r: no file holds it, and the way to one
"${A[@]}" --ranks 0 --log-layout torchrun --log-dir "$d/tn" sh -c "$sh_worker" >"$d/o" 2>"$d/e"
expect_eq "--ranks 0, torchrun's layout: exit 7" "$?" 7
check "--ranks 0, torchrun's layout: says -r or --tee would keep it" \
    grep -q "^amlrun:   (no more of its stderr was kept: in torchrun's layout, -r or --tee keeps all of it)\$" "$d/e"

# --- every rank on the console: nothing quoted twice
"${A[@]}" sh -c "$sh_worker" >"$d/o" 2>"$d/e"
expect_eq "all ranks shown: exit 7" "$?" 7
check "all ranks shown: no quotes in the summary" sh -c '! grep -q "last lines of its" "$1"' sh "$d/e"

# --- a Python worker raising without @record, --ranks 0 and -r
if "$TORCH_PY" -c '' 2>/dev/null; then
    cat >"$d/fail.py" <<'EOF'
import os, time
if os.environ["RANK"] == "1":
    raise ValueError("rank 1 refuses: bad value 42")
time.sleep(30)
EOF
    for how in "--ranks 0" "-r 2"; do
        # shellcheck disable=SC2086
        "${A[@]}" $how --python "$TORCH_PY" "$d/fail.py" >"$d/o" 2>"$d/e"
        expect_eq "Python, $how: exit 1" "$?" 1
        quoted "Python, $how: the summary quotes the ValueError" "$d/e" stderr \
            "ValueError: rank 1 refuses: bad value 42"
        check "Python, $how: and the traceback's line" \
            grep -qF 'amlrun:   |     raise ValueError("rank 1 refuses: bad value 42")' "$d/e"
    done
else
    skip "Python worker" "no $TORCH_PY"
fi
