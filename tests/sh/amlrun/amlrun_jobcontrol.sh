#!/usr/bin/env bash
# Job control as a shell user expects it: SIGTSTP (Ctrl-Z) to amlrun stops
# the workers' process groups and then amlrun, SIGCONT (fg, bg) continues
# them, a stopped worker still ends at once when the job is stopped, and a
# worker stopped by SIGTTIN (it read the terminal from its background
# group) is reported once instead of waited on silently.  No real terminal
# is needed: signals are sent directly and states read from /proc/PID/stat;
# the SIGTTIN case runs under script(1), which gives a pty.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"

fresh() { rm -rf "$TEST_TMP/$1"; mkdir -p "$TEST_TMP/$1"; echo "$TEST_TMP/$1"; }
state() { awk '{print $3}' "/proc/$1/stat" 2>/dev/null; }
# states PID...: their states, one letter each ('-' for a process gone)
states() { local p s=; for p; do s+=$(state "$p" || true); [ -e "/proc/$p" ] || s+=-; done; echo "$s"; }
# wait_states WANT TIMEOUT PID...: until every PID is in state WANT
wait_states() {
    local want=$1 deadline=$((SECONDS + $2)); shift 2
    until [ "$(states "$@")" = "$(printf "%${#}s" | tr ' ' "$want")" ]; do
        [ "$SECONDS" -ge "$deadline" ] && return 1
        sleep 0.02
    done
}
# at_once NAME ERRFILE: the job ended at once, not after the --term-timeout
# of 30 s (default and given) that it would otherwise wait out: no SIGKILL
# was needed (amlrun says "... sending SIGKILL" when it escalates).  What
# happened is checked, not how long it took.
at_once() {
    check "$1: ended at once, not after --term-timeout (no SIGKILL needed)" \
        sh -c "! grep -q 'sending SIGKILL' '$2'"
}
WORKER='echo $$ >"$0/pid.$RANK"; exec sleep 300'

# pg COMMAND...: in a process group of its own, as a shell with job control
# starts a job.  Its parent (this shell) is in another group of the same
# session, so the group is not orphaned and the kernel does not discard a
# SIGTSTP, whether or not this shell has job control or a terminal.
PG=(perl -e 'setpgrp(0, 0) or die "setpgrp: $!"; exec @ARGV or die "exec: $!"')

# --- SIGTSTP stops the workers and amlrun; SIGCONT continues them all
d=$(fresh tstp)
"${PG[@]}" "$AMLRUN" --nproc-per-node 2 sh -c "$WORKER" "$d" >"$d/out" 2>"$d/err" &
a=$!
if wait_for 2 30 "$d" pid.; then
    sleep 0.1
    w0=$(cat "$d/pid.0") w1=$(cat "$d/pid.1")
    kill -TSTP "$a"
    check "SIGTSTP: amlrun and both workers are stopped" wait_states T 10 "$a" "$w0" "$w1"
    kill -CONT "$a"
    check "SIGCONT: amlrun and both workers run again" wait_states S 10 "$a" "$w0" "$w1"
    kill -TSTP "$a"
    check "SIGTSTP again: all stopped again" wait_states T 10 "$a" "$w0" "$w1"
    kill -CONT "$a"
    wait_states S 10 "$a" "$w0" "$w1"
    kill -TERM "$a"
    wait "$a"
    rc=$?
    expect_eq "after a stop and a continue, SIGTERM still ends the job: 143" "$rc" 143
    at_once "after a stop and a continue" "$d/err"
else
    fail "SIGTSTP: the workers started"; kill -KILL "$a"; wait "$a"
fi

# --- a stopped worker gets SIGCONT after SIGTERM: the job ends at once, not
# after the whole --term-timeout
d=$(fresh stopped)
"${PG[@]}" "$AMLRUN" --nproc-per-node 2 --term-timeout 30 sh -c "$WORKER" "$d" >"$d/out" 2>"$d/err" &
a=$!
if wait_for 2 30 "$d" pid.; then
    w1=$(cat "$d/pid.1")
    kill -STOP "$w1"
    wait_states T 10 "$w1"
    kill -TERM "$a"
    wait "$a"
    rc=$?
    expect_eq "stopped worker, SIGTERM to amlrun: 143" "$rc" 143
    at_once "stopped worker" "$d/err"
else
    fail "stopped worker: the workers started"; kill -KILL "$a"; wait "$a"
fi

# the same when another rank fails and the job stops on its own
d=$(fresh fail)
"${PG[@]}" "$AMLRUN" --nproc-per-node 2 --term-timeout 30 sh -c \
    '[ "$RANK" = 1 ] && { while [ ! -e "$0/go" ]; do sleep 0.02; done; exit 3; }; echo $$ >"$0/pid.0"; exec sleep 300' \
    "$d" >"$d/out" 2>"$d/err" &
a=$!
if wait_for 1 30 "$d" pid.0; then
    kill -STOP "$(cat "$d/pid.0")"
    wait_states T 10 "$(cat "$d/pid.0")"
    touch "$d/go"
    wait "$a"
    rc=$?
    expect_eq "rank 1 fails while rank 0 is stopped: exits 3" "$rc" 3
    at_once "rank 1 fails while rank 0 is stopped" "$d/err"
else
    fail "stopped worker, failing rank: the workers started"; kill -KILL "$a"; wait "$a"
fi

# --- SIGTSTP ignored when amlrun starts stays ignored, in the workers too
d=$(fresh ignored)
perl -e '$SIG{TSTP} = "IGNORE"; exec @ARGV or die' \
    "$AMLRUN" sh -c 'grep SigIgn /proc/self/status' >"$d/ign"
ign=$(awk '{print $2}' "$d/ign")
expect_eq "inherited SIG_IGN for SIGTSTP kept in the worker" "$(( 0x$ign >> 19 & 1 ))" 1

# --- a worker that reads the terminal: reported once, by rank; the job
# still ends at once (under script(1): a pty, amlrun in its foreground group)
if have script && script -qec true /dev/null </dev/null >/dev/null 2>&1; then
    d=$(fresh ttin)
    export AMLRUN d
    script -qec 'echo $$ >"$d/apid"; exec "$AMLRUN" --nproc-per-node 2 sh -c "[ \$RANK = 1 ] && read x </dev/tty; exec sleep 300" 2>"$d/err"' \
        /dev/null </dev/null >"$d/script.out" 2>&1 &
    s=$!
    if wait_grep 30 SIGTTIN "$d/err"; then
        sleep 0.3  # time for a second report, if there were one
        check "SIGTTIN: reported naming rank 1" grep -q \
            "^amlrun: rank 1 (local 1, pid [0-9]*): stopped by SIGTTIN: it read from the terminal" "$d/err"
        expect_eq "SIGTTIN: reported once" "$(grep -c SIGTTIN "$d/err")" 1
        kill -TERM "$(cat "$d/apid")"
        wait "$s"
        rc=$?
        expect_eq "SIGTTIN, then SIGTERM to amlrun: 143" "$rc" 143
        at_once "SIGTTIN, then SIGTERM" "$d/err"
    else
        fail "SIGTTIN: reported"
        diag "$(cat "$d/err")"
        [ -s "$d/apid" ] && kill -KILL "$(cat "$d/apid")"
        kill -KILL "$s"; wait "$s"
    fi
else
    skip "SIGTTIN: reported" "script(1) cannot give a pty here"
fi
