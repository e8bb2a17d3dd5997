"""One real PyTorch DDP job (gloo, CPU) that starts the way the module is
meant for: amldist.export(), then init_process_group("env://"), under any
launcher, including one that sets none of the canonical variables (mpirun,
srun).  Each replica trains on its own batches; then all compare their
parameters.  One line per rank in $DDP_OUT.<rank>: "<host> rank=R/W
local=L/LW node=N launcher=X canonical=BOOL agree=BOOL trained=BOOL
binding=SOURCE gpu=G planned=BOOL cpus_ok=BOOL": canonical says whether the
launcher had set RANK itself, planned whether binding()'s planned cpus are
the ones the rank runs on, cpus_ok whether its cpus are the affinity."""
import os
import socket

import amldist

had_rank = "RANK" in os.environ
before = amldist.export()   # the layout, from the launcher's own variables

import torch                # noqa: E402 (after export, as a user would)
import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo", init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
assert (rank, world) == (before.rank, before.world_size), (rank, world, before)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                            torch.nn.Linear(16, 1))
start = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
torch.manual_seed(100 + rank)
for _ in range(3):
    x = torch.randn(16, 8)
    loss = ((ddp(x) - x.sum(1, keepdim=True)) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
final = torch.cat([p.detach().flatten() for p in model.parameters()])
every = [torch.zeros_like(final) for _ in range(world)]
dist.all_gather(every, final)
agree = all(torch.equal(f, final) for f in every)
bound = amldist.binding()
line = (f"{socket.gethostname()} rank={rank}/{world} "
        f"local={before.local_rank}/{before.local_world_size} "
        f"node={before.node_rank} launcher={before.launcher} "
        f"canonical={had_rank} agree={agree} "
        f"trained={not torch.equal(final, start)} binding={bound.source} "
        f"gpu={bound.gpu} planned={bound.planned_cpus == bound.cpus} "
        f"cpus_ok={set(bound.cpus) == os.sched_getaffinity(0)}")
with open(f"{os.environ['DDP_OUT']}.{rank}", "w") as f:
    print(line, file=f)
dist.destroy_process_group()
