#!/usr/bin/env python3
"""A few steps of PyTorch DistributedDataParallel on CPU (gloo), started by
any launcher that sets the torchrun variables (amlrun, torchrun, mpirun +
amlrun).  Every rank trains on different data; DDP averages the gradients,
so all replicas must end with identical parameters, which is checked with
an all_gather.  Exits 1 if they differ or nothing was learnt.

    amlrun --nproc-per-node 4 examples/ddp_train.py [STEPS] [--epochs N]
    mpirun -np 4 amlrun examples/ddp_train.py

--epochs N runs the STEPS (default 20) N times, as the Azure ML examples'
train.py --epochs 10 asks.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("steps", nargs="?", type=int, default=20)
    ap.add_argument("--epochs", type=int, default=1)
    args = ap.parse_args()
    steps = args.steps * args.epochs
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    # The launcher's variables and the process group must agree.
    assert rank == int(os.environ["RANK"]), (rank, os.environ["RANK"])
    assert world == int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])

    torch.manual_seed(rank)  # different initial weights: DDP must sync them
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(1000 + rank)  # different data
    target_w = torch.arange(8, dtype=torch.float32).unsqueeze(1) / 8
    losses = []
    for _ in range(steps):
        x = torch.randn(32, 8, generator=data)
        loss = torch.nn.functional.mse_loss(ddp(x), x @ target_w)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())

    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat)
    agree = all(torch.equal(gathered[0], g) for g in gathered)
    learnt = losses[-1] < losses[0]
    print(f"ddp rank {rank}/{world} local {local}: loss {losses[0]:.4f} -> "
          f"{losses[-1]:.4f}, replicas agree: {agree}, "
          f"checksum {flat.double().sum().item():.9f}", flush=True)
    dist.destroy_process_group()
    return 0 if agree and learnt else 1


if __name__ == "__main__":
    sys.exit(main())
