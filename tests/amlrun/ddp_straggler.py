"""A DDP-like job (gloo, CPU) where rank $SLOW_RANK reaches every step
$SLOW_MS later than the others: each rank calls amldist.progress(step) as
it arrives at the step's all_reduce, for the straggler statistics across
nodes.  $STEPS steps."""
import os
import time

import amldist
import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
slow = int(os.environ.get("SLOW_RANK", "-1")) == rank
delay = int(os.environ.get("SLOW_MS", "40")) / 1000
for step in range(int(os.environ.get("STEPS", "40"))):
    time.sleep(0.02)
    if slow:
        time.sleep(delay)
    amldist.progress(step)
    dist.all_reduce(torch.ones(4))
dist.destroy_process_group()
