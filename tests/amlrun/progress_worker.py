"""A training loop's shape with amldist.progress (pure Python): STEPS steps
of STEP_MS milliseconds, rank SLOW's EXTRA_MS more, a call after each.
With PROGRESS_START=DIR, the ranks start their steps together;
with PROGRESS_STOP=FILE, the steps end once FILE exists.  With
FAIL_FIRST=1, rank 0 fails at the end of the job's first attempt
(TORCHELASTIC_RESTART_COUNT=0), so that amlrun restarts the workers.

    progress_worker.py STEPS STEP_MS SLOW EXTRA_MS"""
import os
import sys
import time

import amldist

steps, ms, slow, extra = (int(a) for a in sys.argv[1:5])
rank = int(os.environ.get("RANK", "0"))
attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
pause = (ms + (extra if rank == slow else 0)) / 1000
# PROGRESS_START=DIR: the ranks take their first step together, once every
# one has its DIR/ready.RANK: each import of amldist (and of Python) takes
# its own time on a loaded machine, and a rank that began its steps half a
# second early was ahead at each of the first dozen steps in spite of
# being the slowest.
start = os.environ.get("PROGRESS_START")
if start:
    open(os.path.join(start, "ready.%d" % rank), "w").close()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    while sum(f.startswith("ready.") for f in os.listdir(start)) < world:
        time.sleep(0.005)

# PROGRESS_STOP=FILE: no step after FILE exists (the test has seen what it
# wanted of a long run, and need not wait the rest out).
stop = os.environ.get("PROGRESS_STOP")
done = 0
for step in range(1, steps + 1):
    if stop and os.path.exists(stop):
        break
    time.sleep(pause)
    assert amldist.progress(step) == 0
    done = step
if os.environ.get("FAIL_FIRST") == "1" and attempt == 0 and rank == 0:
    sys.exit(3)
print(f"rank {rank}: {done} steps")
