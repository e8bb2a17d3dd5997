"""A DDP-like job (gloo, CPU) where rank $SLOW_RANK reaches every step
$SLOW_MS later than the others: each rank calls amldist.progress(step) as
it arrives at the step's all_reduce, for the straggler statistics across
nodes.  $STEPS steps.  With $RING_DIR set, the same steps without PyTorch:
tests/amlrun/ring.py's all_reduce (Unix sockets in that directory) in
place of gloo's."""
import os
import sys
import time

import amldist

RING_DIR = os.environ.get("RING_DIR")
if RING_DIR:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import ring
    r = ring.Ring(RING_DIR)
    rank = r.rank

    def all_reduce():
        r.all_reduce(1)
else:
    import torch
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()

    def all_reduce():
        dist.all_reduce(torch.ones(4))
slow = int(os.environ.get("SLOW_RANK", "-1")) == rank
delay = int(os.environ.get("SLOW_MS", "40")) / 1000
for step in range(int(os.environ.get("STEPS", "40"))):
    time.sleep(0.02)
    if slow:
        time.sleep(delay)
    amldist.progress(step)
    all_reduce()
if not RING_DIR:
    dist.destroy_process_group()
