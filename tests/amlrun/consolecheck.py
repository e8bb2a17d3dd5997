"""Compares amlrun's --event-log-handler console lines with torchrun's.

usage: consolecheck.py REFERENCE < STDERR
REFERENCE: lines torchrun 2.11's console handler wrote on an H100 machine
(tests/amlrun/torchrun-2.11-console-events.jsonl).  Every JSON line of
STDERR must have, for the reference event of its state and source (or of
its source alone), the same keys in the same order, values of the same
JSON types (null where torchrun has null; a number where it has one), and
the same inner "metadata" keys and types.  Prints "bad: ..." or the
events as "STATE/SOURCE" words in order.
"""
import json
import sys

ref = [json.loads(l) for l in open(sys.argv[1])]


def shape(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, list):
        return "list:" + ",".join(shape(x) for x in v)
    return type(v).__name__


def inner(e):
    return [(k, shape(v)) for k, v in json.loads(e["metadata"]["metadata"]).items()]


def like(e):
    m = e["metadata"]
    for r in ref:
        if r["source"] == e["source"] and r["metadata"]["state"] == m["state"]:
            return r
    worker = [r for r in ref if r["source"] == e["source"] and r["metadata"]["global_rank"] is not None]
    agent = [r for r in ref if r["source"] == e["source"] and r["metadata"]["duration_ms"] is None]
    return (worker or agent or [None])[-1]


out = []
for line in sys.stdin:
    if not line.startswith("{"):
        continue
    e = json.loads(line)
    r = like(e)
    m = e["metadata"]
    what = "%s/%s" % (m["state"], e["source"])
    if r is None:
        print("bad: %s has no torchrun counterpart" % what)
        sys.exit(0)
    if list(e) != list(r) or list(m) != list(r["metadata"]):
        print("bad: %s keys %s %s" % (what, list(e), list(m)))
        sys.exit(0)
    if e["name"] != "torchelastic.worker.status." + m["state"] or e["timestamp"] != 0:
        print("bad: %s name %s" % (what, e["name"]))
        sys.exit(0)
    # A restart's rendezvous: torchrun's worker group keeps the rank and
    # size of the round before (the reference is a first round's).
    again = m["agent_restarts"] > 0 and m["state"] in ("RENDEZVOUS", "ASSIGN_WORKER_RANKS")
    for k in m:
        if k in ("raw_error", "duration_ms", "metadata") or (again and k == "group_rank"):
            continue
        if shape(m[k]) != shape(r["metadata"][k]):
            print("bad: %s %s is %s, torchrun's %s" % (what, k, shape(m[k]), shape(r["metadata"][k])))
            sys.exit(0)
    if (m["duration_ms"] is None) != (r["metadata"]["duration_ms"] is None):
        print("bad: %s duration_ms %s" % (what, m["duration_ms"]))
        sys.exit(0)
    got, want = [k for k, _ in inner(e)], [k for k, _ in inner(r)]
    # A FAILED worker's exit code and pid are numbers (torchrun's own
    # tests: [1], [1000]); the transcript has only successes.
    skip = ("exit_code", "worker_pid") if m["state"] == "FAILED" else ()
    types = lambda ev: [t for k, t in inner(ev) if k not in skip]
    if not again and types(e) != types(r):
        print("bad: %s inner metadata types %s, torchrun's %s" % (what, inner(e), inner(r)))
        sys.exit(0)
    if got != want:
        print("bad: %s inner metadata %s, torchrun's %s" % (what, got, want))
        sys.exit(0)
    out.append(what)
print(" ".join(out))
