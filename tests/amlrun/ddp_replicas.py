"""A small DDP job (gloo, CPU) for the launcher tests: every replica trains
on its own batches, then all compare their parameters.  One line per rank:
"<host> rank=R/W node=N agree=True trained=True", on stdout, or in
$DDP_OUT.<rank> when DDP_OUT is set (some launchers' output forwarding
joins the lines of different ranks)."""
import os, socket
import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
assert rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"])
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
start = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
torch.manual_seed(100 + rank)  # each replica its own batches
for _ in range(5):
    x = torch.randn(32, 8)
    loss = ((ddp(x) - x.sum(1, keepdim=True)) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
final = torch.cat([p.detach().flatten() for p in model.parameters()])
every = [torch.zeros_like(final) for _ in range(world)]
dist.all_gather(every, final)
agree = all(torch.equal(f, final) for f in every)
moved = not torch.equal(final, start)
line = (f"{socket.gethostname()} rank={rank}/{world} "
        f"node={os.environ.get('NODE_RANK', '?')} agree={agree} trained={moved}")
if "DDP_OUT" in os.environ:
    with open(f"{os.environ['DDP_OUT']}.{rank}", "w") as f:
        print(line, file=f)
else:
    print(line, flush=True)
dist.destroy_process_group()
