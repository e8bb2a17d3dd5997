"""A worker for the amlrun signal tests.

usage: sigworker.py DIR MODE [ARG]
Records every signal it gets as DIR/<SIGNAME>.<RANK> and says it is ready
with DIR/ready.<RANK> once its handlers are in place.  MODES:
  wait        stop signals are recorded, then the worker exits 0
  ignore-term SIGTERM is ignored; other stop signals as in wait
  forward     SIGUSR1/SIGUSR2/SIGWINCH recorded; exits 0 once DIR/finish
              exists (the test creates it, then sends SIGUSR2)
  fail N      rank 1 exits N once every rank is ready; others as in wait
"""
import os
import signal
import sys
import time

d, mode = sys.argv[1], sys.argv[2]
rank = os.environ["RANK"]
world = int(os.environ["WORLD_SIZE"])


def record(name):
    with open(f"{d}/{name}.{rank}", "a") as f:
        f.write(f"{os.getpid()}\n")


def on_stop(sig, frame):
    record(signal.Signals(sig).name)
    sys.exit(0)


def on_forward(sig, frame):
    record(signal.Signals(sig).name)


for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
    signal.signal(s, on_stop)
for s in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGWINCH):
    signal.signal(s, on_forward)
if mode == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
record("ready")

if mode == "fail" and rank == "1":
    while len([f for f in os.listdir(d) if f.startswith("ready.")]) < world:
        time.sleep(0.01)
    sys.exit(int(sys.argv[3]))
while not (mode == "forward" and os.path.exists(f"{d}/finish")):
    signal.pause()
