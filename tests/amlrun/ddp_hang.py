"""A DDP job (gloo, CPU) where one rank gets stuck in a Python function
while the others wait for it in all_reduce: for --hang-timeout across
nodes.  Each rank prints "step N rank R" per step; rank $STUCK_RANK stops
printing at step $STUCK_STEP and spins in stuck_in_python() (its line is
the test's to find in the report); with $STUCK_HOST set, the rank on that
host is the stuck one instead (the rendezvous chose its rank).  With $PROGRESS set, every rank also
calls amldist.progress(step).  With $RING_DIR set, the same steps without
PyTorch: tests/amlrun/ring.py's all_reduce (Unix sockets in that
directory) in place of gloo's."""
import os
import sys
import time

RING_DIR = os.environ.get("RING_DIR")
if not RING_DIR:
    print("importing torch", flush=True)  # a sign of life before a slow import
    import torch  # noqa: E402
    import torch.distributed as dist  # noqa: E402

STUCK_RANK = int(os.environ.get("STUCK_RANK", "-1"))
STUCK_STEP = int(os.environ.get("STUCK_STEP", "3"))
STUCK_HOST = os.environ.get("STUCK_HOST")


def stuck_in_python():
    while True:  # the stuck rank's line
        time.sleep(0.05)


if RING_DIR:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import ring  # noqa: E402
    r = ring.Ring(RING_DIR)
    rank = r.rank

    def all_reduce():
        r.all_reduce(1)
else:
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    model = torch.nn.Linear(8, 1)
    ddp = torch.nn.parallel.DistributedDataParallel(model)

    def all_reduce():
        dist.all_reduce(torch.ones(4))
progress = None
if os.environ.get("PROGRESS"):
    import amldist
    progress = amldist.progress
if STUCK_HOST and os.uname().nodename == STUCK_HOST:
    STUCK_RANK = rank
for step in range(1000000):
    if rank == STUCK_RANK and step == STUCK_STEP:
        stuck_in_python()
    all_reduce()
    if progress:
        progress(step)
    print(f"step {step} rank {rank}", flush=True)
    time.sleep(0.1)
