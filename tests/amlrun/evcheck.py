"""Checks an amlrun --event-log file; prints one summary line.

usage: evcheck.py FILE
Every line must be one JSON object with "event", "time", "ts", "host",
"node", "run_id"; worker events also "rank" and "local_rank"; "ts" never goes
back within a host.  Prints "bad: REASON" or the events' names in order,
repeated names squeezed ("start worker_start*2 ...").
"""
import json
import sys

COMMON = ("event", "time", "ts", "host", "node", "run_id")
WORKER = ("worker_start", "worker_exit", "failure")
names, last = [], {}
with open(sys.argv[1], "rb") as f:
    data = f.read()
if data and not data.endswith(b"\n"):
    print("bad: the last line is not whole")
    sys.exit(0)
for n, raw in enumerate(data.decode("ascii").splitlines(), 1):
    try:
        ev = json.loads(raw)
    except ValueError as e:
        print(f"bad: line {n} is not JSON ({e}): {raw[:80]}")
        sys.exit(0)
    missing = [k for k in COMMON + (("rank", "local_rank") if ev.get("event") in WORKER else ())
               if k not in ev]
    if missing:
        print(f"bad: line {n} ({ev.get('event')}) lacks {missing}")
        sys.exit(0)
    if ev["ts"] < last.get(ev["host"], 0):
        print(f"bad: line {n} goes back in time")
        sys.exit(0)
    last[ev["host"]] = ev["ts"]
    if names and names[-1][0] == ev["event"]:
        names[-1][1] += 1
    else:
        names.append([ev["event"], 1])
print(" ".join(e if k == 1 else f"{e}*{k}" for e, k in names))
