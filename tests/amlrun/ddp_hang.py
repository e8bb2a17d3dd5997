"""A DDP job (gloo, CPU) where one rank gets stuck in a Python function
while the others wait for it in all_reduce: for --hang-timeout across
nodes.  Each rank prints "step N rank R" per step; rank $STUCK_RANK stops
printing at step $STUCK_STEP and spins in stuck_in_python() (its line is
the test's to find in the report).  With $PROGRESS set, every rank also
calls amldist.progress(step)."""
import os
import time

print("importing torch", flush=True)  # a sign of life before a slow import
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

STUCK_RANK = int(os.environ.get("STUCK_RANK", "-1"))
STUCK_STEP = int(os.environ.get("STUCK_STEP", "3"))


def stuck_in_python():
    while True:  # the stuck rank's line
        time.sleep(0.05)


dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
progress = None
if os.environ.get("PROGRESS"):
    import amldist
    progress = amldist.progress
model = torch.nn.Linear(8, 1)
ddp = torch.nn.parallel.DistributedDataParallel(model)
for step in range(1000000):
    if rank == STUCK_RANK and step == STUCK_STEP:
        stuck_in_python()
    t = torch.ones(4)
    dist.all_reduce(t)
    if progress:
        progress(step)
    print(f"step {step} rank {rank}", flush=True)
    time.sleep(0.1)
