#!/usr/bin/env bash
# --event-log FILE: one JSON line per event of the job (start, worker start
# and exit, failure, restart, stop, end), each parsed by python3's json
# (tests/amlrun/evcheck.py); a path that cannot be opened is an error at
# start; a full disk, a file size limit and a FIFO nobody reads never stall
# the job, and every line written stays whole.  torchrun's
# --event-log-handler console: its agent's one event on stderr.  The
# multi-node events (rendezvous rounds, the job's restarts):
# tests/sh/rdzv/rdzv_event_log.sh.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
d=$TEST_TMP/evlog
mkdir -p "$d"
EV="$TORCH_PY $HELPERS/evcheck.py"
# Rank 1 fails at once; the others wait to be stopped (SIGTERM kills them).
cat >"$d/fail1.py" <<'PY'
import os, sys, time
if os.environ["RANK"] == "1":
    sys.exit(3)
time.sleep(120)
PY
cat >"$d/sleep.py" <<'PY'
import os, signal, sys, time
open(sys.argv[1] + "/ready." + os.environ["RANK"], "w").close()
time.sleep(120)
PY

# --- a failing rank and one restart: every event, in order, valid JSON
"$AMLRUN" -q --nproc-per-node 2 --max-restarts 1 --master-port "$(free_port)" \
    --event-log "$d/a.jsonl" "$d/fail1.py" >"$d/out" 2>"$d/err"
rc=$?
expect_eq "failure and restart: amlrun exits 3" "$rc" 3
ATTEMPT="worker_start*2 worker_exit failure stop worker_exit"
expect_eq "failure and restart: the events, in order" "$($EV "$d/a.jsonl")" \
    "start $ATTEMPT restart $ATTEMPT end"
expect_eq "the end event carries amlrun's exit status and the restarts" \
    "$($TORCH_PY -c 'import json,sys; e=[json.loads(l) for l in open(sys.argv[1])][-1]; print(e["exit_code"], e["restarts"])' "$d/a.jsonl")" "3 1"
expect_eq "the failure names rank 1, its exit code and attempt's worker pids are real" \
    "$($TORCH_PY -c 'import json,sys
ev=[json.loads(l) for l in open(sys.argv[1])]
f=[e for e in ev if e["event"]=="failure"][0]
ex={e["pid"] for e in ev if e["event"]=="worker_exit"}
st={e["pid"] for e in ev if e["event"]=="worker_start"}
k=sorted((e["rank"], e["exit_code"], e["signal"]) for e in ev if e["event"]=="worker_exit")
print(f["rank"], f["local_rank"], f["exit_code"], f["signal"], len(st), st==ex, k)' "$d/a.jsonl")" \
    "1 1 3 None 4 True [(0, None, 'SIGTERM'), (0, None, 'SIGTERM'), (1, 3, None), (1, 3, None)]"
# Appended: a second run adds its own lines after the first run's.
"$AMLRUN" -q --nproc-per-node 1 --master-port "$(free_port)" --event_log "$d/a.jsonl" true
expect_eq "a second run appends (underscore spelling)" "$($EV "$d/a.jsonl" | sed 's/.* end start/ end start/;s/^[^ ]* //')" \
    "end start worker_start worker_exit end"

# --- a stop signal: stop (signal) and an end that names it
"$AMLRUN" -q --nproc-per-node 2 --master-port "$(free_port)" --event-log "$d/s.jsonl" \
    "$d/sleep.py" "$d" >"$d/out" 2>"$d/err" &
pid=$!
wait_for 2 30 "$d" ready.
kill -TERM "$pid"
wait "$pid"
expect_eq "SIGTERM: amlrun exits 143" "$?" 143
expect_eq "SIGTERM: the events" "$($EV "$d/s.jsonl")" "start worker_start*2 stop worker_exit*2 end"
expect_eq "SIGTERM: the stop says why, the end names the signal" \
    "$($TORCH_PY -c 'import json,sys
ev=[json.loads(l) for l in open(sys.argv[1])]
s=[e for e in ev if e["event"]=="stop"][0]
print(s["reason"], s["signal"], ev[-1]["stop_signal"], ev[-1]["exit_code"])' "$d/s.jsonl")" "signal SIGTERM SIGTERM 143"

# --- paths that cannot be opened: an error at start, nothing run
mkfifo "$d/fifo"
for bad in "$d" "$d/no/such/dir/ev" "$d/fifo"; do
    rm -f "$d/ran"
    "$AMLRUN" --nproc-per-node 1 --event-log "$bad" touch "$d/ran" >/dev/null 2>"$d/err"
    rc=$?
    expect_eq "--event-log $bad: usage error" "$rc" 2
    check "--event-log $bad: said once, naming the file" \
        test "$(grep -c "^amlrun: --event-log $bad: cannot open it" "$d/err")" = 1
    check "--event-log $bad: the command did not run" test ! -e "$d/ran"
done
check "a FIFO without a reader: said so" grep -q "a FIFO with no reader" "$d/err"

# --- a full disk (/dev/full: ENOSPC on every write): the job runs as ever
out=$("$AMLRUN" --nproc-per-node 2 --master-port "$(free_port)" --event-log /dev/full \
      "$TORCH_PY" -c 'print("ran")' 2>"$d/err")
rc=$?
expect_eq "/dev/full: the job exits 0 and its workers ran" "$rc $out" "0 ran
ran"
check "/dev/full: the first drop said, with the reason" \
    grep -q "^amlrun: --event-log /dev/full: event dropped (No space left on device)" "$d/err"
check "/dev/full: the count at the end" grep -q "^amlrun: --event-log /dev/full: [0-9]* events dropped$" "$d/err"

# --- a file size limit reached mid-line: the torn line is cut off again
(ulimit -f 1; "$AMLRUN" -q --nproc-per-node 4 --master-port "$(free_port)" \
    --event-log "$d/limit.jsonl" true 2>"$d/err")
expect_eq "ulimit -f 1: the job exits 0" "$?" 0
check "ulimit -f 1: the limit was reached (a drop said)" grep -q "event dropped (File too large)" "$d/err"
got=$($EV "$d/limit.jsonl")
check "ulimit -f 1: every line written is whole JSON ($got)" test "${got#bad}" = "$got"
# A file past the limit already: the first event (before amlrun blocks
# SIGXFSZ for the job) must not kill amlrun with SIGXFSZ.
head -c 5000 /dev/zero >"$d/full.jsonl"
(ulimit -f 4; "$AMLRUN" -q --nproc-per-node 1 --master-port "$(free_port)" \
    --event-log "$d/full.jsonl" sh -c 'echo ran' >"$d/out" 2>"$d/err")
expect_eq "a file past ulimit -f from the start: the job runs, amlrun exits 0" "$? $(cat "$d/out")" "0 ran"
check "... and says the events were dropped" grep -q "events dropped$" "$d/err"

# --- a FIFO whose reader reads nothing until the job is over: the job
# does not wait for it; what the pipe took is whole lines
cat >"$d/reader.py" <<'PY'
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
fcntl.fcntl(fd, 1031, 4096)  # F_SETPIPE_SZ: a small pipe fills at once
open(sys.argv[2], "w").close()
while not os.path.exists(sys.argv[3]):
    time.sleep(0.05)
data = b""
while True:
    try:
        chunk = os.read(fd, 65536)
    except BlockingIOError:
        break
    if not chunk:
        break
    data += chunk
open(sys.argv[4], "wb").write(data)
PY
mkfifo "$d/slow"
"$TORCH_PY" "$d/reader.py" "$d/slow" "$d/reading" "$d/over" "$d/slow.jsonl" &
rpid=$!
wait_for 1 30 "$d" reading
"$AMLRUN" -q --nproc-per-node 8 --max-restarts 6 --master-port "$(free_port)" \
    --event-log "$d/slow" "$d/fail1.py" >"$d/out" 2>"$d/err"
rc=$?
touch "$d/over"
wait "$rpid"
expect_eq "a FIFO nobody reads: the job ends as ever (status 3 after 6 restarts)" "$rc" 3
check "a FIFO nobody reads: the events it could not take are counted" \
    grep -q "^amlrun: --event-log $d/slow: [0-9]* events dropped$" "$d/err"
got=$($EV "$d/slow.jsonl")
check "a FIFO nobody reads: what it took is whole JSON lines from the start ($got)" \
    test "${got#start }" != "$got"

# --- torchrun's --event-log-handler console: its agent's events on
# stderr, shaped as those torchrun 2.11 wrote on a GPU machine (a recorded
# transcript: keys, their order, JSON types; tests/amlrun/consolecheck.py)
CC="$TORCH_PY $HELPERS/consolecheck.py $HELPERS/torchrun-2.11-console-events.jsonl"
"$AMLRUN" -q --nproc-per-node 2 --max-restarts 1 --master-port "$(free_port)" \
    --event-log-handler console "$d/fail1.py" >"$d/out" 2>"$d/err"
ATT="RENDEZVOUS/AGENT ASSIGN_WORKER_RANKS/AGENT START/WORKER START/WORKER"
expect_eq "console: torchrun's events; the agent SUCCEEDED even when a worker failed (as torchrun's)" \
    "$($CC <"$d/err")" "$ATT $ATT TERMINATED/WORKER FAILED/WORKER SUCCEEDED/AGENT"
expect_eq "console: the failed worker's exit code, pid and raw_error; the restarts" \
    "$(grep '^{' "$d/err" | "$TORCH_PY" -c 'import json,sys
ev=[json.loads(l) for l in sys.stdin]
f=[e["metadata"] for e in ev if e["metadata"]["state"]=="FAILED"][0]
md=json.loads(f["metadata"])
print(f["global_rank"], md["exit_code"], md["worker_pid"]==[int(f["worker_id"])], f["raw_error"], ev[-1]["metadata"]["agent_restarts"])')" \
    '1 [3] True {"message": "<NONE>"} 1'
PET_EVENT_LOG_HANDLER=console "$AMLRUN" -q --nproc-per-node 2 --master-port "$(free_port)" \
    "$d/sleep.py" "$d/c" >"$d/out" 2>"$d/err" &
pid=$!
mkdir -p "$d/c"
wait_for 2 30 "$d/c" ready.
kill -TERM "$pid"
wait "$pid"
expect_eq "console from PET_EVENT_LOG_HANDLER, stopped by SIGTERM: the agent FAILED" \
    "$($CC <"$d/err" | sed 's/.* //')" "FAILED/AGENT"
check "... with torchrun's SignalException as its raw_error" \
    grep -q '"raw_error": "SignalException: Process [0-9]* got signal: 15"' "$d/err"
"$AMLRUN" -q --nproc-per-node 1 --master-port "$(free_port)" --event-log-handler null true 2>"$d/err"
expect_eq "null (torchrun's default): no event" "$(grep -c '^{' "$d/err")" 0

# --- torchrun 2.x's options amlrun cannot honour: refused, with the reason
for bad in "--event-log-handler syslog" "--logs-specs my_specs" "--logs_specs=x" \
           "--nproc-per-node xpu" "--nproc_per_node=xpu"; do
    "$AMLRUN" $bad true >/dev/null 2>"$d/err"
    rc=$?
    expect_eq "'$bad': usage error" "$rc" 2
    check "'$bad': one message that says why" sh -c "test \"\$(grep -c '^amlrun: ' '$d/err')\" = 1 &&
        grep -q 'Python\|XPU' '$d/err'"
done
check "PET_NPROC_PER_NODE=xpu is refused too, naming the variable" \
    sh -c "PET_NPROC_PER_NODE=xpu '$AMLRUN' true 2>&1 | grep -q '^amlrun: PET_NPROC_PER_NODE=xpu: .*XPU'"
