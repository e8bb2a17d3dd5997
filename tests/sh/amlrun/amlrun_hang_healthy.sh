#!/usr/bin/env bash
# amldist-test: slow
# --hang-timeout never kills a healthy job (issue 37): each case a real
# job of Python workers (tests/amlrun/healthy_worker.py) that runs longer
# than the timeout and succeeds, with no "hang:" line: ranks that call the
# progress API beside ranks that only print or say nothing, a "\r" bar, the
# whole job stopped and continued, amlrun alone stopped, the workers alone
# stopped, a console that stops reading, a long step announced through the
# API, every core busy, a restart, Ctrl-Z typed in a terminal, a bar in
# a terminal.  Then the real hangs of the same shapes,
# still caught (124) and named right.  What happened is checked, never
# how long it took.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
export OMP_NUM_THREADS=1 PYTHONPATH=$TOP/python
unset PET_NPROC_PER_NODE PET_MAX_RESTARTS PET_MASTER_ADDR AMLRUN_HANG_TIMEOUT
W=$TOP/tests/amlrun/healthy_worker.py

fresh() { rm -rf "$TEST_TMP/$1"; mkdir -p "$TEST_TMP/$1"; echo "$TEST_TMP/$1"; }

# healthy NAME RC ERRFILE: the job succeeded and no hang was said.
healthy() {
    expect_eq "$1: exit status 0" "$2" 0
    check "$1: no hang said" sh -c '! grep -q "hang:" "$0"' "$3" || diag "$(cat "$3")"
}

# run TIMEOUT SEC DIR MODE...: the job in the foreground.
run() {
    local t=$1 sec=$2 dir=$3
    shift 3
    "$AMLRUN" --hang-timeout "$t" --nproc-per-node $# "$W" "$dir" "$sec" "$@" \
        >"$dir/out" 2>"$dir/err"
}

# pids DIR N: the N workers' pids, once each has written its own.
pids() {
    wait_for "$2" 60 "$1" 'pid\.' || return 1
    cat "$1"/pid.*
}

# --- (a) rank 0 calls the API, rank 1 prints and never calls it
d=$(fresh a)
run 2 4 "$d" api lines
healthy "(a) an API rank and a printing rank" "$?" "$d/err"

# --- (b) rank 0 calls the API, rank 1 is silent and never calls it
d=$(fresh b)
run 2 4 "$d" api silent
healthy "(b) an API rank and a silent rank that never called it" "$?" "$d/err"

# --- (c) a "\r" bar on rank 0 (no newline until the end), the others silent
d=$(fresh c)
run 2 4 "$d" bar silent silent
healthy "(c) a carriage-return progress bar" "$?" "$d/err"
check "(c) the bar reached the console, ended by its newline" grep -q '[0-9]/20$' "$d/out"

# --- (d) the whole job stopped (workers' groups and amlrun) for longer
# than the timeout, then continued, as Slurm's scontrol suspend does
d=$(fresh d)
run 2 6 "$d" lines api &
job=$!
if p=$(pids "$d" 2); then
    nap 0.5
    kill -STOP "$job"; for w in $p; do kill -STOP -- "-$w"; done
    nap 3
    for w in $p; do kill -CONT -- "-$w"; done; kill -CONT "$job"
fi
wait "$job"
healthy "(d) the whole job stopped 3 s and continued" "$?" "$d/err"

# --- (d') the workers alone stopped (amlrun sees them stopped)
d=$(fresh d2)
run 2 6 "$d" api api &
job=$!
if p=$(pids "$d" 2); then
    nap 0.5
    for w in $p; do kill -STOP -- "-$w"; done
    nap 3
    for w in $p; do kill -CONT -- "-$w"; done
fi
wait "$job"
healthy "(d') the workers alone stopped 3 s and continued" "$?" "$d/err"

# --- (e) amlrun alone stopped while its workers print into their pipes
d=$(fresh e)
run 2 7 "$d" lines lines &
job=$!
if pids "$d" 2 >/dev/null; then
    nap 0.5
    kill -STOP "$job"
    nap 4
    kill -CONT "$job"
fi
wait "$job"
healthy "(e) amlrun alone stopped 4 s, the workers printing" "$?" "$d/err"

# --- (f) a console that stops reading: amlrun blocks writing to it, and
# the workers block writing to amlrun
d=$(fresh f)
{ "$AMLRUN" --hang-timeout 2 --nproc-per-node 2 "$W" "$d" 6 flood api 2>"$d/err"
  echo $? >"$d/rc"; } | { nap 4; cat >/dev/null; }
healthy "(f) a console that stops reading for 4 s" "$(cat "$d/rc")" "$d/err"

# --- (g) a long step announced with amldist.progress_expect
d=$(fresh g)
run 2 5 "$d" long api
healthy "(g) a long step announced through the API" "$?" "$d/err"

# --- (k) every core busy beside the job (as many busy loops as CPUs, at
# the job's own priority): late timers are no hang
d=$(fresh k)
busy=()
for _ in $(seq "$(nproc)"); do sh -c 'while :; do :; done' & busy+=($!); done
run 2 5 "$d" api lines
rc=$?
kill "${busy[@]}" 2>/dev/null; wait "${busy[@]}" 2>/dev/null
healthy "(k) every core busy beside the job" "$rc" "$d/err"

# --- (l) a restart: the first attempt's rank 0 fails after 1.5 s while
# rank 1 calls the API; the next attempt is judged afresh
d=$(fresh l)
"$AMLRUN" --hang-timeout 2 --max-restarts 1 --nproc-per-node 2 "$W" "$d" 4 \
    failfirst api >"$d/out" 2>"$d/err"
healthy "(l) a restart after a failed attempt" "$?" "$d/err"
check "(l) the job restarted once" grep -q "restarts 1" "$d/err" || diag "$(cat "$d/err")"

# --- (m) Ctrl-Z typed in a terminal, 4 s stopped, then fg: an interactive
# bash on a pseudo-terminal (tests/amlrun/ptyrun.py), typed as a person does
d=$(fresh m)
out=$(PS1='$ ' python3 "$TOP/tests/amlrun/ptyrun.py" "$d/tty" 'expect:\$ ' \
      "send:$AMLRUN --hang-timeout 2 --nproc-per-node 2 $W $d 6 api lines 2>$d/err\\n" \
      "until:[ -s $d/pid.0 ] && [ -s $d/pid.1 ]" 'send:\x1a' 'expect:Stopped' \
      'expect:\$ ' 'until:sleep 4' 'send:fg\n' 'expect:\$ ' 'send:echo rc=$?\n' \
      'expect:rc=0\n' 'send:exit\n' -- bash --norc --noprofile -i)
if [ "$(sed -n 's/^status //p' <<<"$out")" = 0 ]; then
    healthy "(m) Ctrl-Z in a terminal for 4 s, then fg" 0 "$d/err"
else
    fail "(m) Ctrl-Z in a terminal for 4 s, then fg: the job went on to exit 0"
    diag "$out"; diag "$(cat "$d/err")"
fi

# --- (n) in a terminal (workers on ptys, partial lines live): a "\r" bar
# on rank 0, rank 1 silent and never calling the API, for longer than the
# timeout: the bar's updates reach the terminal before its newline
d=$(fresh n)
out=$(python3 "$TOP/tests/amlrun/ptyrun.py" "$d/tty" 'expect:\r5/20' \
      -- "$AMLRUN" --hang-timeout 2 --nproc-per-node 2 "$W" "$d" 4 bar silent)
healthy "(n) a '\\r' bar and a silent rank in a terminal" \
    "$(sed -n 's/^status //p' <<<"$out")" "$d/tty"

# --- the real hangs of these shapes are still caught
# A rank that called the API stops calling while another progresses.
d=$(fresh h)
run 2 30 "$d" stall api
expect_eq "(h) an API rank stalls while another progresses: 124" "$?" 124
check "(h) rank 0 alone is named" grep -q "^amlrun: hang: rank 0 made no progress for" "$d/err" ||
    diag "$(cat "$d/err")"

# A stalled API rank beside a silent one that never called: a hang, and
# the silent rank is never the one named (silence without the API is no
# evidence: the stacks tell).
d=$(fresh i)
run 2 30 "$d" stall silent
expect_eq "(i) an API rank stalls beside a silent rank: 124" "$?" 124
check "(i) a hang is said" grep -q "^amlrun: hang: " "$d/err"
check "(i) the silent rank 1 is not named" \
    sh -c '! grep -q "hang: ranks\{0,1\} [0-9,-]*1[0-9,-]* made no" "$0"' "$d/err" || diag "$(cat "$d/err")"

# An announced step that is over without progress.
d=$(fresh j)
run 2 30 "$d" expired api
expect_eq "(j) an announced step that never ends: 124" "$?" 124
check "(j) rank 0 is named" grep -q "^amlrun: hang: rank 0 made no progress for" "$d/err" ||
    diag "$(cat "$d/err")"
