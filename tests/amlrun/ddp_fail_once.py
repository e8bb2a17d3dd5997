"""tests/amlrun/ddp_replicas.py, but the worker named by RZ_FAIL_WORKER
("HOST/LOCAL_RANK") fails the first time it runs in the job (a marker in
RZ_DIR, which every namespace node sees): it joins the process group, so
that its peers are inside training when it goes, then exits 7.  Started
again (a restart of the whole job), it runs ddp_replicas.py like the rest."""
import os, runpy, socket, sys, time

who = os.environ["RZ_FAIL_WORKER"]
me = f"{socket.gethostname()}/{os.environ['LOCAL_RANK']}"
marker = os.path.join(os.environ["RZ_DIR"], "ddp-failed")
if me == who:
    try:
        os.mkdir(marker)
        first = True
    except FileExistsError:
        first = False
    if first:
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="env://")
        print(f"rank {dist.get_rank()} fails on {socket.gethostname()} "
              f"(restart {os.environ.get('TORCHELASTIC_RESTART_COUNT')})", flush=True)
        time.sleep(0.5)
        os._exit(7)
print(f"{socket.gethostname()} rank {os.environ['RANK']} starts in restart "
      f"{os.environ.get('TORCHELASTIC_RESTART_COUNT')} port {os.environ.get('MASTER_PORT')}",
      flush=True)
sys.argv = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "ddp_replicas.py")]
runpy.run_path(sys.argv[0], run_name="__main__")
