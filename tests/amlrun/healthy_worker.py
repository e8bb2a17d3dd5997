"""A healthy worker's ways, for amlrun_hang_healthy.sh: each rank does
for SEC seconds what its mode says (MODE of rank R: the R-th after SEC),
in steps of 0.2 s, after writing its pid into DIR/pid.RANK.

    api      amldist.progress(step) after each step, nothing printed
    lines    a line after each step, no call
    silent   nothing at all (the usual `if rank == 0:` logging's others)
    bar      a tqdm-style bar: "\\r" and the count, flushed, one newline
             at the end
    flood    1 KiB lines every 5 ms (a console that does not read fills)
    long     api, but after 3 steps it announces a long step of SEC - 1 s
             (amldist.progress_expect) and takes it, then goes on
    stall    api for 3 steps, then no call for ever (a real hang)
    expired  announces a 1 s step and never reports again (a real hang)
    failfirst  in the first attempt (TORCHELASTIC_RESTART_COUNT 0) silent
             1.5 s, then exit 3; in the next, api

    healthy_worker.py DIR SEC MODE..."""
import os
import sys
import time

import amldist

d, sec = sys.argv[1], float(sys.argv[2])
rank = int(os.environ.get("RANK", "0"))
mode = sys.argv[3 + rank]
with open(os.path.join(d, "pid.%d" % rank), "w") as f:
    f.write("%d\n" % os.getpid())
end = time.monotonic() + sec
step = 0
if mode == "failfirst":
    if os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0":
        time.sleep(1.5)
        sys.exit(3)
    mode = "api"
if mode == "expired":
    amldist.progress_expect(1)
    time.sleep(600)
while time.monotonic() < end:
    if mode == "flood":
        print("x" * 1023, flush=True)
        time.sleep(0.005)
        continue
    time.sleep(0.2)
    step += 1
    if mode in ("api", "long", "stall"):
        amldist.progress(step)
    if mode == "lines":
        print("step", step, flush=True)
    elif mode == "bar":
        sys.stdout.write("\r%d/%d" % (step, int(sec / 0.2)))
        sys.stdout.flush()
    elif mode == "long" and step == 3:
        amldist.progress_expect(sec - 1)
        time.sleep(sec - 1.5)
    elif mode == "stall" and step == 3:
        time.sleep(600)
if mode == "bar":
    print()
print("rank %d done after %d steps" % (rank, step), flush=True)
