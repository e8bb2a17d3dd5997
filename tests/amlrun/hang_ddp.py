"""A PyTorch DDP job (gloo, CPU) in which one rank hangs in a Python
function while the others wait for it in all_reduce.

usage: hang_ddp.py STUCK_RANK DIR
Each rank writes DIR/pid.<RANK> (its pid) and, until its training steps
are done, a line every 0.2 s (a slow start on a loaded machine is not a
hang); it runs three steps of all_reduce, then rank STUCK_RANK enters
stuck_in_data_loader() for ever and the others block in the next
all_reduce.
"""
import os
import sys
import threading
import time

starting = threading.Event()


def heartbeat():
    while not starting.wait(0.2):
        print(f"rank {os.environ['RANK']} starting", flush=True)


def stuck_in_data_loader():
    while True:
        time.sleep(0.5)  # the line the report must name


def train(stuck):
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    t = torch.ones(8)
    for step in range(3):
        dist.all_reduce(t)
        print(f"rank {rank} step {step}", flush=True)
    dist.barrier()
    starting.set()
    beat.join()
    if rank == stuck:
        stuck_in_data_loader()
    dist.all_reduce(t)  # the others wait here


stuck_rank, d = int(sys.argv[1]), sys.argv[2]
with open(f"{d}/pid.{os.environ['RANK']}", "w") as f:
    f.write(f"{os.getpid()}\n")
beat = threading.Thread(target=heartbeat, daemon=True)
beat.start()
train(stuck_rank)
