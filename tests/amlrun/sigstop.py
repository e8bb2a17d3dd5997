"""A worker for the --signals-to-handle tests.

usage: sigstop.py DIR
Writes DIR/env.<RANK> (its TORCHELASTIC_SIGNALS_TO_HANDLE) and DIR/ready.<RANK>
once its handlers are in place; on SIGUSR1, SIGUSR2, SIGTERM or SIGHUP records
DIR/<SIGNAME>.<RANK> and exits 0.
"""
import os
import signal
import sys

d = sys.argv[1]
rank = os.environ["RANK"]


def on_signal(sig, frame):
    with open(f"{d}/{signal.Signals(sig).name}.{rank}", "w") as f:
        f.write(f"{os.getpid()}\n")
    sys.exit(0)


for s in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, on_signal)
with open(f"{d}/env.{rank}", "w") as f:
    f.write(os.environ.get("TORCHELASTIC_SIGNALS_TO_HANDLE", "-") + "\n")
with open(f"{d}/ready.{rank}", "w") as f:
    f.write(f"{os.getpid()}\n")
while True:
    signal.pause()
