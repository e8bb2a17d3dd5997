"""A PyTorch DDP job (gloo, CPU) in which one rank hangs in a Python
function while the others wait for it in all_reduce.

usage: hang_ddp.py STUCK_RANK DIR
Each rank writes DIR/pid.<RANK> (its pid), runs three steps of all_reduce,
printing one line each, then rank STUCK_RANK enters stuck_in_data_loader()
for ever and the others block in the next all_reduce.
"""
import os
import sys
import time

import torch
import torch.distributed as dist


def stuck_in_data_loader():
    while True:
        time.sleep(0.5)  # the line the report must name


def train(stuck):
    rank = dist.get_rank()
    t = torch.ones(8)
    for step in range(3):
        dist.all_reduce(t)
        print(f"rank {rank} step {step}", flush=True)
    if rank == stuck:
        stuck_in_data_loader()
    dist.all_reduce(t)


def main():
    stuck, d = int(sys.argv[1]), sys.argv[2]
    with open(f"{d}/pid.{os.environ['RANK']}", "w") as f:
        f.write(f"{os.getpid()}\n")
    dist.init_process_group("gloo")
    train(stuck)


main()
