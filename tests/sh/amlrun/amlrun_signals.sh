#!/usr/bin/env bash
# amlrun's supervision: failing ranks end the job with their status, stop
# signals are forwarded and followed by SIGKILL after --term-timeout, other
# signals pass through, restarts happen the configured number of times.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
W="$HELPERS/sigworker.py"

# fresh DIR: an empty directory for one case
fresh() { rm -rf "$TEST_TMP/$1"; mkdir -p "$TEST_TMP/$1"; echo "$TEST_TMP/$1"; }

# --- a worker exits 3: the job exits 3, the others get SIGTERM
d=$(fresh fail)
"$AMLRUN" --nproc-per-node 4 "$W" "$d" fail 3 >"$d/out" 2>"$d/err"
expect_eq "worker exits 3: amlrun exits 3" "$?" 3
check "worker exits 3: the summary names rank 1" \
    grep -q "^amlrun: rank 1 (local 1, pid [0-9]*, host .*): exited with status 3 after [0-9.]* s$" "$d/err"
expect_eq "worker exits 3: the other three got SIGTERM" \
    "$(ls "$d" | grep -c '^SIGTERM\.[023]$')" 3
expect_eq "worker exits 3: one summary line only" \
    "$(grep -c 'exited with status' "$d/err")" 1

# --- a worker killed by SIGKILL: 137, named in the summary
d=$(fresh kill)
"$AMLRUN" --nproc-per-node 3 sh -c '[ "$RANK" = 2 ] && kill -KILL $$; exec sleep 60' >"$d/out" 2>"$d/err"
expect_eq "worker SIGKILLed: amlrun exits 137" "$?" 137
check "worker SIGKILLed: the summary says so" \
    grep -q "^amlrun: rank 2 (local 2, pid [0-9]*, host .*): killed by signal 9 (SIGKILL) after [0-9.]* s$" "$d/err"

# --- SIGTERM to amlrun reaches every worker; amlrun exits 128+15.  Job
# control on: a script's background job otherwise starts with SIGINT and
# SIGQUIT ignored, which amlrun respects (checked below).
set -m
for sig in TERM INT HUP QUIT; do
    d=$(fresh "stop$sig")
    "$AMLRUN" --nproc-per-node 3 "$W" "$d" wait >"$d/out" 2>"$d/err" &
    pid=$!
    if wait_for 3 30 "$d" ready.; then
        kill -"$sig" "$pid"
        wait "$pid"
        rc=$?
    else
        kill -KILL "$pid"; wait "$pid"; rc=timeout
    fi
    num=$(kill -l "$sig")
    expect_eq "SIG$sig to amlrun: exits 128+$num" "$rc" $((128 + num))
    expect_eq "SIG$sig to amlrun: every worker got SIG$sig once" \
        "$(cat "$d"/SIG"$sig".* 2>/dev/null | wc -l)" 3
done
set +m

# --- stop signals ignored when amlrun starts stay ignored, in the workers
# too (a background job of a script, nohup)
d=$(fresh ignored)
"$AMLRUN" sh -c 'grep SigIgn /proc/self/status' >"$d/ign" &
wait $!
ign=$(awk '{print $2}' "$d/ign")
expect_eq "inherited SIG_IGN for SIGINT and SIGQUIT kept" "$(( 0x$ign & 6 ))" 6

# --- a worker that ignores SIGTERM is killed after --term-timeout
d=$(fresh grace)
"$AMLRUN" --nproc-per-node 2 --term-timeout 1 "$W" "$d" ignore-term >"$d/out" 2>"$d/err" &
pid=$!
wait_for 2 30 "$d" ready.
kill -TERM "$pid"
wait "$pid"
rc=$?
expect_eq "SIGTERM ignored: amlrun still exits 143" "$rc" 143
check "SIGTERM ignored: SIGKILL after the grace period" \
    grep -q "^amlrun: 2 workers still running 1 s after SIGTERM: sending SIGKILL$" "$d/err"

# --- a second stop signal kills at once
d=$(fresh twice)
"$AMLRUN" --nproc-per-node 2 --term-timeout 300 "$W" "$d" ignore-term >"$d/out" 2>"$d/err" &
pid=$!
wait_for 2 30 "$d" ready.
kill -TERM "$pid"
# (two signals sent back to back would merge into one pending signal)
wait_grep 30 "SIGTERM received: stopping" "$d/err"
kill -TERM "$pid"
wait "$pid"
expect_eq "second SIGTERM: workers killed at once" "$?" 143
check "second SIGTERM: said so" grep -q "SIGTERM received again: killing" "$d/err"

# --- SIGUSR1/SIGUSR2/SIGWINCH are forwarded and the job goes on
d=$(fresh forward)
"$AMLRUN" --nproc-per-node 3 "$W" "$d" forward >"$d/out" 2>"$d/err" &
pid=$!
wait_for 3 30 "$d" ready.
kill -USR1 "$pid"
wait_for 3 30 "$d" SIGUSR1.
kill -WINCH "$pid"
wait_for 3 30 "$d" SIGWINCH.
touch "$d/finish"
kill -USR2 "$pid"
wait "$pid"
expect_eq "SIGUSR1 forwarded: the job goes on and exits 0" "$?" 0
expect_eq "SIGUSR1 reached every worker once" "$(cat "$d"/SIGUSR1.* | wc -l)" 3
expect_eq "SIGWINCH reached every worker once" "$(cat "$d"/SIGWINCH.* | wc -l)" 3
expect_eq "SIGUSR2 reached every worker" "$(cat "$d"/SIGUSR2.* | wc -l)" 3

# --- --ignore-sighup: SIGHUP neither stops the job nor reaches workers
d=$(fresh nohup)
"$AMLRUN" --nproc-per-node 2 --ignore-sighup "$W" "$d" forward >"$d/out" 2>"$d/err" &
pid=$!
wait_for 2 30 "$d" ready.
kill -HUP "$pid"
kill -USR1 "$pid"   # the USR1 lands after the HUP: the HUP was ignored by then
wait_for 2 30 "$d" SIGUSR1.
touch "$d/finish"
kill -USR2 "$pid"
wait "$pid"
expect_eq "--ignore-sighup: the job survives SIGHUP" "$?" 0
expect_eq "--ignore-sighup: no worker saw SIGHUP" "$(ls "$d" | grep -c '^SIGHUP')" 0
# and the workers themselves ignore it, as under nohup
"$AMLRUN" --ignore-sighup sh -c 'grep SigIgn /proc/self/status' >"$d/ign"
ign=$(awk '{print $2}' "$d/ign")
expect_eq "--ignore-sighup: SIGHUP ignored in the worker" "$(( 0x$ign & 1 ))" 1
# workers start with an empty signal mask and nothing else ignored
# (amlrun keeps stop signals its own parent ignored, as nohup and `cmd &` ask,
# so start it with default dispositions: a CI runner may have ignored them)
perl -e '$SIG{$_} = "DEFAULT" for qw(INT QUIT TERM HUP); exec @ARGV or die' \
    "$AMLRUN" sh -c 'grep -E "^Sig(Blk|Ign)" /proc/self/status' >"$d/mask"
expect_eq "worker starts with no blocked signal" "$(awk '/SigBlk/ {print $2}' "$d/mask")" 0000000000000000
# Signals the test's own environment ignores beyond those (a CI harness may
# ignore glibc's 32 and 33) pass through any launcher: amlrun must add none.
perl -e '$SIG{$_} = "DEFAULT" for qw(INT QUIT TERM HUP); exec @ARGV or die' \
    sh -c 'grep SigIgn /proc/self/status' >"$d/mask0"
expect_eq "worker starts with no ignored signal of amlrun's making" \
    "$(awk '/SigIgn/ {print $2}' "$d/mask")" "$(awk '/SigIgn/ {print $2}' "$d/mask0")"

# --- restarts: the configured number of times, counted in the environment
d=$(fresh restart)
# Rank 1 fails only once rank 0 has written its line of this attempt (for
# 5 s at most), or a stop could reach rank 0 before it starts.
"$AMLRUN" --nproc-per-node 2 --max-restarts 2 sh -c \
    'echo "$TORCHELASTIC_RESTART_COUNT $TORCHELASTIC_MAX_RESTARTS" >>"$0/count.$RANK"
     [ "$RANK" = 1 ] || exec sleep 60
     i=0
     while [ "$(cat "$0/count.0" 2>/dev/null | wc -l)" -le "$TORCHELASTIC_RESTART_COUNT" ] && [ $i -lt 500 ]; do
         sleep 0.01; i=$((i + 1))
     done
     exit 5' \
    "$d" >"$d/out" 2>"$d/err"
expect_eq "--max-restarts 2, always failing: status of the last failure" "$?" 5
expect_eq "--max-restarts 2: rank 1 ran 3 times with the restart count" \
    "$(tr '\n' ' ' <"$d/count.1")" "0 2 1 2 2 2 "
expect_eq "--max-restarts 2: rank 0 ran 3 times too" "$(wc -l <"$d/count.0")" 3
expect_eq "--max-restarts 2: two restart notices" \
    "$(grep -c 'restarting the 2 workers of this node' "$d/err")" 2
d=$(fresh recover)
"$AMLRUN" --nproc-per-node 2 --max-restarts 3 sh -c \
    'echo x >>"$0/runs.$RANK"; [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ "$RANK" = 0 ] && exit 4; exit 0' \
    "$d" >"$d/out" 2>"$d/err"
expect_eq "restart that recovers: exit 0" "$?" 0
expect_eq "restart that recovers: one restart" "$(wc -l <"$d/runs.0")" 2

# --- SIGCHLD ignored by whatever started amlrun (its SIG_IGN survives the
# exec): the kernel would reap the workers at once, and amlrun waited for
# them for ever.  It sets SIGCHLD back to its default, for its workers too.
# (perl, in every Debian, sets the disposition and execs.)
# (timeout outside: it sets a handler of its own, which its exec undoes)
ignoring_sigchld() { timeout -k 5 60 perl -e '$SIG{CHLD} = "IGNORE"; exec @ARGV or exit 127' "$@"; }
d=$(fresh sigchld)
ignoring_sigchld "$AMLRUN" --nproc-per-node 2 sh -c \
    '[ "$RANK" = 1 ] && exit 3; exec sleep 60' >"$d/out" 2>"$d/err"
expect_eq "SIGCHLD ignored by amlrun's parent: the job exits 3, the failing rank's" "$?" 3
check "SIGCHLD ignored by amlrun's parent: rank 1 named" \
    grep -q "^amlrun: rank 1 (local 1, pid [0-9]*, host .*): exited with status 3" "$d/err"
# The worker is grep itself (a shell may set SIGCHLD as it likes): SigIgn
# is a hexadecimal mask, SIGCHLD (17) its bit 16.
ignoring_sigchld "$AMLRUN" --nproc-per-node 1 grep '^SigIgn:' /proc/self/status \
    >"$d/out" 2>"$d/err"
ign=$(sed -n 's/^SigIgn:[[:space:]]*//p' "$d/out")
expect_eq "SIGCHLD ignored by amlrun's parent: at its default in the worker" \
    "${ign:+$((0x$ign & 0x10000))}" 0
