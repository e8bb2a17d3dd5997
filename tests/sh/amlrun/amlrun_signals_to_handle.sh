#!/usr/bin/env bash
# torchrun 2.x's --signals-to-handle: a listed signal is passed on to every
# worker and stops the job (torchrun's agent raises SignalException for
# each listed signal and shuts its workers down with it), with 128+N; a
# signal not listed is not caught, as in torchrun: its default action ends
# amlrun, and amlrun's guard ends the workers (torchrun would leave them).
# amlrun_signals.sh covers amlrun's behaviour without the option.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
W="$HELPERS/sigstop.py"
fresh() { rm -rf "$TEST_TMP/$1"; mkdir -p "$TEST_TMP/$1"; echo "$TEST_TMP/$1"; }

# job NAME SIGNAL [VAR=VALUE...] -- AMLRUN-ARGS: a job of 2 workers gets
# SIGNAL once both are ready; sets $d, $rc.  amlrun starts with SIGNAL's
# default action (env --default-signal): one this shell was started with
# ignored (perf record ignores SIGUSR2 in what it runs, nohup SIGHUP)
# stays ignored in amlrun, by design, and the job would wait for ever.
job() {
    local name=$1 sig=$2; shift 2
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    d=$(fresh "$name")
    env --default-signal="$sig" "${envs[@]}" AMLRUN_TEST_MARK="$d" "$AMLRUN" --nproc-per-node 2 \
        --master-port "$(free_port)" --term-timeout 20 "$@" "$W" "$d" >"$d/out" 2>"$d/err" &
    local pid=$!
    wait_for 2 30 "$d" ready.
    kill -"$sig" "$pid"
    wait "$pid"
    rc=$?
}

job usr1 USR1 -- --signals-to-handle SIGTERM,SIGUSR1
expect_eq "listed SIGUSR1: the job stops with 128+10" "$rc" 138
expect_eq "listed SIGUSR1: passed on to both workers" "$(ls "$d" | grep -c '^SIGUSR1\.')" 2
check "listed SIGUSR1: amlrun says it stops the job" grep -q "SIGUSR1" "$d/err"
expect_eq "TORCHELASTIC_SIGNALS_TO_HANDLE as torchrun 2.x exports it" \
    "$(cat "$d"/env.* | sort -u)" "SIGTERM,SIGUSR1"

job usr2 USR2 -- --signals_to_handle ' SIGUSR2 ,SIGTERM'
expect_eq "listed SIGUSR2 (underscore spelling, spaces): stops with 140" "$rc" 140
expect_eq "listed SIGUSR2: passed on to both workers" "$(ls "$d" | grep -c '^SIGUSR2\.')" 2

job pet USR2 PET_SIGNALS_TO_HANDLE=SIGUSR2 -- 
expect_eq "PET_SIGNALS_TO_HANDLE=SIGUSR2: stops with 140" "$rc" 140
expect_eq "PET_SIGNALS_TO_HANDLE=SIGUSR2: passed on" "$(ls "$d" | grep -c '^SIGUSR2\.')" 2

job term TERM -- --signals-to-handle SIGTERM,SIGINT,SIGHUP,SIGQUIT
expect_eq "torchrun's default list given: SIGTERM stops with 143" "$rc" 143
expect_eq "torchrun's default list given: SIGTERM passed on" "$(ls "$d" | grep -c '^SIGTERM\.')" 2

# Not listed: the default action (USR2 and HUP terminate) ends amlrun; the
# workers get nothing of it and are killed by the guard.
for sig in USR2 HUP; do
    job "not$sig" "$sig" -- --signals-to-handle SIGTERM,SIGUSR1
    expect_eq "SIG$sig not listed: amlrun ends by it (128+N)" "$rc" "$((128 + $(kill -l SIG$sig)))"
    expect_eq "SIG$sig not listed: not passed on" "$(ls "$d" | grep -c "^SIG$sig\.")" 0
    left=
    for _ in $(seq 100); do
        left=$(marked_pids "AMLRUN_TEST_MARK=$d")
        [ -z "$left" ] && break
        sleep 0.1
    done
    expect_eq "SIG$sig not listed: no worker outlives amlrun" "$left" ""
done

# Signals that cannot be caught, that amlrun keeps for itself (reaping, job
# control), faults, and names torchrun would not know either are refused.
d=$(fresh refused)
for bad in SIGKILL SIGSTOP SIGCHLD SIGTSTP SIGSEGV TERM sigterm "SIGTERM,,SIGINT" ""; do
    "$AMLRUN" --signals-to-handle "$bad" true >/dev/null 2>"$d/err"
    rc=$?
    expect_eq "--signals-to-handle '$bad': usage error" "$rc" 2
    check "--signals-to-handle '$bad': one message naming the option" \
        test "$(grep -c '^amlrun: --signals-to-handle ' "$d/err")" = 1
done
