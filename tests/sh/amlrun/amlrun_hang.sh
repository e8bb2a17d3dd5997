#!/usr/bin/env bash
# --hang-timeout, --hang-report and --timeout as the supervisor sees them
# (the stacks' content: amlrun_hang_stacks.sh): bad values refused, a job
# without output lines hung (124) while lines keep one alive, a hang
# counted as a restart, --timeout ending the job whatever restarts are
# left; the notices of ranks still running, the stops that name them, the
# success line; no timer at all without --hang-timeout.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
export OMP_NUM_THREADS=1

fresh() { rm -rf "$TEST_TMP/$1"; mkdir -p "$TEST_TMP/$1"; echo "$TEST_TMP/$1"; }

# --- bad input: a usage error naming the option, before any worker
d=$(fresh bad)
for bad in "--hang-timeout 0" "--hang-timeout -1" "--hang-timeout abc" \
    "--hang-timeout=" "--timeout 0" "--timeout -2.5" "--timeout 1x" "--timeout nan" \
    "--hang-timeout 0x10" "--hang-timeout 1e-12" "--hang-timeout 1e-7" "--timeout 1e12" \
    "--timeout inf" "--hang-timeout .5"; do
    # shellcheck disable=SC2086
    "$AMLRUN" $bad --nproc-per-node 1 --no-python touch "$d/ran" >/dev/null 2>"$d/err"
    rc=$?
    opt=${bad%% *}; opt=${opt%%=*}
    expect_eq "'$bad': usage error (2)" "$rc" 2
    check "'$bad': the message names $opt" grep -q "^amlrun: $opt .*: want seconds > 0" "$d/err"
done
# Decimal seconds, as the other durations: a floor of a millisecond (the
# supervisor's timers), at most a year, both named.
"$AMLRUN" --hang-timeout 0.0005 --nproc-per-node 1 --no-python touch "$d/ran" 2>"$d/err"
expect_eq "--hang-timeout under the floor: usage error (2)" "$?" 2
check "--hang-timeout under the floor: the floor named" \
    grep -q "^amlrun: --hang-timeout 0.0005: want at least 0.001 s" "$d/err"
"$AMLRUN" --timeout 31622401 --nproc-per-node 1 --no-python touch "$d/ran" 2>"$d/err"
expect_eq "--timeout over a year: usage error (2)" "$?" 2
check "--timeout over a year: the limit named" \
    grep -q "^amlrun: --timeout 31622401: want at most a year" "$d/err"
AMLRUN_HANG_TIMEOUT=0 "$AMLRUN" --nproc-per-node 1 --no-python touch "$d/ran" 2>"$d/err"
expect_eq "AMLRUN_HANG_TIMEOUT=0: usage error (2)" "$?" 2
check "AMLRUN_HANG_TIMEOUT=0: named" grep -q "^amlrun: AMLRUN_HANG_TIMEOUT=0: want seconds > 0" "$d/err"
"$AMLRUN" --hang-timeout 5 --hang-report "$d/no/such/dir/r.json" --nproc-per-node 1 \
    --no-python touch "$d/ran" 2>"$d/err"
expect_eq "--hang-report in a missing directory: refused at start (2)" "$?" 2
check "--hang-report: the message names it" grep -q "^amlrun: --hang-report $d/no/such/dir/r.json: cannot write it" "$d/err"
check "bad input: no worker ever started" test ! -e "$d/ran"
AMLRUN_HANG_TIMEOUT=0.5 "$AMLRUN" --hang-timeout 30 --nproc-per-node 1 --no-python sh -c 'sleep 1' 2>"$d/err"
expect_eq "the command line beats AMLRUN_HANG_TIMEOUT" "$?" 0

# --- no line for SEC: a hang, 124; the event log's record
d=$(fresh lines)
TORCHELASTIC_ERROR_FILE=$d/agent.json "$AMLRUN" --hang-timeout 1 --event-log "$d/ev" \
    --nproc-per-node 3 --no-python sh -c 'echo up; exec sleep 600' >"$d/out" 2>"$d/err"
expect_eq "silent ranks: a hang, exit status 124" "$?" 124
check "silent ranks: the job's end says hang" \
    grep -q "^amlrun: job failed (exit status 124): hang: no rank wrote any output for [0-9.]* s (--hang-timeout 1)$" "$d/err"
check "silent ranks: an agent above amlrun gets the hang in its error file" \
    "$TORCH_PY" -c 'import json, sys
e = json.load(open(sys.argv[1]))
sys.exit(0 if e["message"]["message"].startswith("hang: no rank wrote any output") and e["message"]["errorCode"] == 124 and e["message"]["extraInfo"]["timestamp"].isdigit() else 1)' "$d/agent.json"
check "silent ranks: said, with the timeout" \
    grep -q "^amlrun: hang: no rank wrote any output for [0-9.]* s (--hang-timeout 1): reading the stacks of the 3 ranks$" "$d/err"
check "silent ranks: the stop names the ranks" \
    grep -q "^amlrun: hang: stopping the 3 workers, ranks 0-2 (SIGTERM, SIGKILL after 30 s)$" "$d/err"
check "silent ranks: no success line" sh -c "! grep -q 'exited 0' '$d/err'"
check "event log: a hang record" grep -q '"event": "hang".*"reason": "hang", "timeout_s": 1\.000, "idle_s": [0-9.]*, "stalled": \[\], "running": 3' "$d/ev"
check "event log: the stop's reason is hang" grep -q '"event": "stop".*"reason": "hang", "signal": "SIGTERM", "running": 3' "$d/ev"
check "event log: the end's exit code is 124" grep -q '"event": "end".*"exit_code": 124' "$d/ev"

# --- lines keep a job alive: one rank prints every 0.1 s for 3 s, the
# others say nothing; --hang-timeout 2 (20 times the gap between lines)
d=$(fresh alive)
"$AMLRUN" --hang-timeout 2 --nproc-per-node 2 --no-python \
    sh -c 'if [ "$RANK" = 0 ]; then for i in $(seq 30); do echo $i; sleep 0.1; done; else sleep 3; fi' \
    >"$d/out" 2>"$d/err"
expect_eq "a rank's lines keep the job alive: it succeeds" "$?" 0
check "... no hang said" sh -c "! grep -q hang '$d/err'"

# --- a hang counts as a restart: --max-restarts 1, hung twice
d=$(fresh restart)
"$AMLRUN" --hang-timeout 1 --max-restarts 1 --nproc-per-node 2 --no-python \
    sh -c 'touch "$0/started.$RANK.$TORCHELASTIC_RESTART_COUNT"; exec sleep 600' "$d" \
    >"$d/out" 2>"$d/err"
expect_eq "hung twice with --max-restarts 1: 124" "$?" 124
expect_eq "... restarted once" "$(grep -c '^amlrun: restarting the 2 workers of this node (restart 1 of 1)$' "$d/err")" 1
expect_eq "... two hangs said" "$(grep -c '^amlrun: hang: no rank wrote any output' "$d/err")" 2
expect_eq "... every rank started in both attempts" "$(ls "$d" | grep -c '^started\.[01]\.[01]$')" 4

# --- --timeout: the job ends after SEC whatever restarts are left, even
# while ranks print
d=$(fresh timeout)
"$AMLRUN" --timeout 1.5 --max-restarts 3 --event-log "$d/ev" --nproc-per-node 2 --no-python \
    sh -c 'while :; do echo tick; sleep 0.05; done' >"$d/out" 2>"$d/err"
expect_eq "--timeout 1.5: exit status 124" "$?" 124
check "--timeout: said, with the job's time" \
    grep -q "^amlrun: --timeout 1.5: the job ran [0-9.]* s: reading the stacks of the 2 ranks$" "$d/err"
check "--timeout: no restart" sh -c "! grep -q restarting '$d/err'"
check "event log: the timeout's record" grep -q '"event": "hang".*"reason": "timeout", "timeout_s": 1\.500, "run_s": ' "$d/ev"

# --- ranks still running after others ended: a notice naming the rank and
# its pid; then the success line.  Rank 1 waits for a file made once the
# notice is seen.
d=$(fresh notice)
"$AMLRUN" --nproc-per-node 3 --no-python \
    sh -c 'if [ "$RANK" = 1 ]; then echo $$ >"$0/pid"; while [ ! -e "$0/go" ]; do sleep 0.05; done; fi' "$d" \
    >"$d/out" 2>"$d/err" &
pid=$!
if wait_grep 60 "ranks done" "$d/err"; then
    check "notice: 2 of 3 done, waiting for rank 1 with its node and pid" \
        grep -q "^amlrun: 2 of 3 ranks done; waiting for rank 1 (node 0, pid $(cat "$d/pid")) for [0-9]* s$" "$d/err"
else
    fail "notice: 2 of 3 done, waiting for rank 1 with its node and pid"
fi
touch "$d/go"
wait "$pid"
expect_eq "notice: the job then succeeds" "$?" 0
check "success line: ranks, time, restarts" \
    grep -q "^amlrun: 3 ranks exited 0 in [0-9]*\.[0-9] s (restarts 0)$" "$d/err"
expect_eq "success line: the last line" "$(tail -n 1 "$d/err" | cut -c1-20)" "amlrun: 3 ranks exit"

# --- -q: no notice, no success line (rank 1 outlives the first notice)
d=$(fresh quiet)
"$AMLRUN" -q --nproc-per-node 2 --no-python sh -c '[ "$RANK" = 1 ] && sleep 6; true' \
    >"$d/out" 2>"$d/err"
expect_eq "-q: succeeds" "$?" 0
expect_eq "-q: nothing on stderr" "$(cat "$d/err")" ""

# --- after a restart: the success line counts it
d=$(fresh restarts)
"$AMLRUN" --max-restarts 2 --nproc-per-node 2 --no-python \
    sh -c '[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ "$RANK" = 1 ] && exit 3; true' \
    >"$d/out" 2>"$d/err"
expect_eq "a failure then success: 0" "$?" 0
check "... the success line says restarts 1" grep -q "^amlrun: 2 ranks exited 0 in [0-9.]* s (restarts 1)$" "$d/err"

# --- a stop names the ranks still running: SIGTERM with rank 0 done
d=$(fresh stop)
set -m
"$AMLRUN" --nproc-per-node 3 --no-python \
    sh -c '[ "$RANK" = 0 ] && exit 0; touch "$0/ready.$RANK"; exec sleep 600' "$d" \
    >"$d/out" 2>"$d/err" &
pid=$!
if wait_for 2 30 "$d" ready.; then
    kill -TERM "$pid"
fi
wait "$pid"
expect_eq "SIGTERM: 143" "$?" 143
check "SIGTERM: the ranks still running named" \
    grep -q "^amlrun: SIGTERM received: stopping 2 workers, ranks 1-2 (SIGKILL after 30 s)$" "$d/err"
set +m
d=$(fresh failure)
"$AMLRUN" --nproc-per-node 4 --no-python \
    sh -c 'if [ "$RANK" = 2 ]; then while [ $(ls "$0" | grep -c ready) -lt 3 ]; do sleep 0.05; done; exit 5; fi; touch "$0/ready.$RANK"; exec sleep 600' "$d" \
    >"$d/out" 2>"$d/err"
expect_eq "a failure: its status" "$?" 5
check "a failure: the others named" \
    grep -q "^amlrun: stopping the other 3 workers, ranks 0-1,3 (SIGTERM, SIGKILL after 30 s)$" "$d/err"

# --- no --hang-timeout: no look is armed (-v says when one is)
d=$(fresh verbose)
"$AMLRUN" -v --nproc-per-node 2 --no-python sh -c 'echo a' >/dev/null 2>"$d/plain"
check "no --hang-timeout: amlrun -v ran the job" grep -q "started 2 workers" "$d/plain"
check "no --hang-timeout: no look armed" sh -c "! grep -q 'hang watch' '$d/plain'"
"$AMLRUN" -v --hang-timeout 100 --max-restarts 1 --nproc-per-node 2 --no-python \
    sh -c '[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && exit 1; echo a' >/dev/null 2>"$d/hang"
expect_eq "--hang-timeout 100: a look armed for each attempt" \
    "$(grep -c '^amlrun: hang watch: a hang is 100 s without progress; first look in 100\.0 s$' "$d/hang")" 2

# --- per-process mode has no supervisor: said, and the command runs
d=$(fresh inplace)
"$AMLRUN" --mode process --hang-timeout 5 --timeout 9 --no-python touch "$d/ran" 2>"$d/err"
expect_eq "per-process mode with --hang-timeout: the command's status" "$?" 0
check "per-process mode: the options said to have no effect" \
    grep -q "^amlrun: per-process mode: --hang-timeout, --hang-report and --timeout have no effect" "$d/err"
check "per-process mode: the command ran" test -e "$d/ran"

# --- with the control plane (c10d, one node): the hang goes through the
# host, which restarts the job's round, then ends it with 124
d=$(fresh c10d)
"$AMLRUN" --nnodes 1 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:0 --hang-timeout 1 \
    --max-restarts 1 --nproc-per-node 2 --no-python sh -c 'exec sleep 600' >"$d/out" 2>"$d/err"
expect_eq "c10d: hung twice with --max-restarts 1: 124" "$?" 124
expect_eq "c10d: one restart of the round" \
    "$(grep -c '^amlrun: restarting the workers of all 1 nodes (restart 1 of 1; this node is node 0)$' "$d/err")" 1
check "c10d: the job's summary names the hang" \
    grep -q "^amlrun:   host .*: hang: no progress for [0-9.]* s (--hang-timeout 1)$" "$d/err"
