#!/usr/bin/env bash
# amldist-test: slow
# The right culprit (issue 37): four ranks in lock-step, each calling
# amldist.progress(step) every step, rank 3 50 ms before the others; then
# rank 2 sticks before the next all_reduce while the others wait for it
# there.  Rank 2, and only rank 2, is named in the console ("likely cause:
# rank 2"), the --hang-report JSON ("outliers": [2]) and the --event-log
# ("hang"'s "stalled" is [] when the stacks decide, or [2]; never rank 3),
# however it is stuck: in a Python function (load_batch), in a native call
# (libc's pause through ctypes), or waiting for a child process of its own
# that is the stuck one.  The first case is real PyTorch DDP (gloo, CPU);
# the other two take the same steps with tests/amlrun/ring.py's all_reduce
# (Unix sockets, no PyTorch: 0.05 s of CPU a rank against 1.5 s), since
# what they vary is how the stuck rank is stuck, not how the others wait
# (amlrun_hang_stacks and multinode_hang check gloo's waiters as a group).
# What happened is checked, never how long it took.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
export OMP_NUM_THREADS=1 PYTHONPATH=$TOP/python:$TOP/tests/amlrun
unset PET_NPROC_PER_NODE PET_MAX_RESTARTS PET_MASTER_ADDR AMLRUN_HANG_TIMEOUT

fresh() { rm -rf "$TEST_TMP/$1"; mkdir -p "$TEST_TMP/$1"; echo "$TEST_TMP/$1"; }

W=$TEST_TMP/culprit.py
cat >"$W" <<'PY'
import ctypes, multiprocessing, os, sys, threading, time

# Until its first progress a rank is judged by its output: a line every
# 0.2 s while torch is imported and the group forms (a slow start on a
# loaded machine is not a hang).
started = threading.Event()
def heartbeat():
    while not started.wait(0.2):
        print(f"rank {os.environ['RANK']} starting", flush=True)
threading.Thread(target=heartbeat, daemon=True).start()

import amldist

STUCK = 2

def load_batch(mode):
    if mode == "python":
        while True:
            time.sleep(1000)
    elif mode == "native":
        libc = ctypes.CDLL(None)
        while True:
            libc.pause()
    else:  # the child is the stuck one; the rank waits for it
        p = multiprocessing.get_context("fork").Process(target=child_loads)
        p.start()
        p.join()

def child_loads():
    while True:
        time.sleep(1000)

mode, d, collective = sys.argv[1], sys.argv[2], sys.argv[3]
if collective == "gloo":
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = torch.ones(8)
    def all_reduce():
        dist.all_reduce(t)
else:  # the same steps without PyTorch (tests/amlrun/ring.py)
    import ring
    r = ring.Ring(d)
    rank = r.rank
    def all_reduce():
        r.all_reduce(1)
with open(f"{d}/pid.{rank}", "w") as f:
    f.write(f"{os.getpid()}\n")
for step in range(1000000):
    all_reduce()
    if rank == 3:
        amldist.progress(step)  # 50 ms before the others
        time.sleep(0.05)
    else:
        time.sleep(0.05)
        amldist.progress(step)
    started.set()
    if step == 5 and rank == STUCK:
        load_batch(mode)
PY

for run in python:gloo native:ring child:ring; do
    mode=${run%:*}
    d=$(fresh "$mode")
    "$AMLRUN" --hang-timeout 3 --hang-report "$d/r.json" --event-log "$d/ev.jsonl" \
        --nproc-per-node 4 --master-port "$(free_port)" "$W" "$mode" "$d" "${run#*:}" >"$d/out" 2>"$d/err"
    expect_eq "$mode: exit status 124" "$?" 124
    check "$mode: the console names rank 2 alone as the likely cause" \
        grep -q "stacks of 4 ranks, [0-9]* groups; likely cause: rank 2$" "$d/err" ||
        diag "$(cat "$d/err")"
    check "$mode: the console never names rank 3 as stalled" \
        sh -c '! grep -qE "hang: ranks? ([0-9,-]*,)?3([,-][0-9,-]*)? made no progress" "$0"' "$d/err"
    got=$("$TORCH_PY" - "$d/r.json" "$d/ev.jsonl" "$mode" <<'PY' 2>&1
import json, sys
bad = []
r = json.load(open(sys.argv[1]))
# Every thread once, a descendant's too (its Python frames were once
# appended again at every round of the capture until its deadline).
for rk in r["ranks"]:
    ids = [(t.get("pid"), t.get("tid")) for t in rk.get("threads") or []]
    if len(ids) != len(set(ids)) or any(tid is None for _, tid in ids):
        bad.append(f"rank {rk['rank']}: {len(ids)} threads, {len(set(ids))} distinct")
if sys.argv[3] == "child":
    r2 = [rk for rk in r["ranks"] if rk["rank"] == 2][0]
    kids = [t for t in r2["threads"] if t["pid"] != r2["pid"] and t.get("python")]
    if len(kids) != 1:
        bad.append(f"rank 2's child: {len(kids)} threads with Python frames")
if r.get("outliers") != [2]:
    bad.append(f"outliers {r.get('outliers')}")
if not r.get("groups") or r["groups"][0]["ranks"] != [2]:
    bad.append(f"first group {r.get('groups', [{}])[0].get('ranks')}")
ev = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
hangs = [e for e in ev if e.get("event") == "hang" or e.get("name") == "hang" or e.get("type") == "hang"]
if len(hangs) != 1:
    bad.append(f"{len(hangs)} hang events")
for h in hangs:
    if h.get("stalled") not in ([], [2]):
        bad.append(f"stalled {h.get('stalled')}")
print("ok" if not bad else "bad: " + ", ".join(bad))
PY
)
    expect_eq "$mode: JSON outliers [2], every thread once, event log's stalled [] or [2]" "$got" ok
done
