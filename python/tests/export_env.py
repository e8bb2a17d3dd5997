"""amldist.export() under any launcher, without PyTorch: the layout it
derives and what it puts in the environment, which is all that
init_process_group("env://") reads (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT), for the shell tests that check a launcher's layout beside one
real DDP job (ddp_export.py) rather than a DDP job of every layout (each
worker importing torch: a second of CPU).  One line per rank in
$DDP_OUT.<rank>: "<host> rank=R/W local=L/LW node=N launcher=X
canonical=BOOL env=RANK/WORLD_SIZE local=LOCAL_RANK/LOCAL_WORLD_SIZE
master=MASTER_ADDR:MASTER_PORT binding=SOURCE", canonical saying whether the
launcher had set RANK itself."""
import os
import socket

import amldist

had_rank = "RANK" in os.environ
layout = amldist.export()
env = os.environ
line = (f"{socket.gethostname()} rank={layout.rank}/{layout.world_size} "
        f"local={layout.local_rank}/{layout.local_world_size} "
        f"node={layout.node_rank} launcher={layout.launcher} "
        f"canonical={had_rank} env={env['RANK']}/{env['WORLD_SIZE']} "
        f"local={env['LOCAL_RANK']}/{env['LOCAL_WORLD_SIZE']} "
        f"master={env['MASTER_ADDR']}:{env['MASTER_PORT']} "
        f"binding={amldist.binding().source}")
with open(f"{env['DDP_OUT']}.{layout.rank}", "w") as f:
    print(line, file=f)
