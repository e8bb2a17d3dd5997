#!/usr/bin/env python3
"""Real torchrun, many times from one interpreter, for the tests that run it
beside amlrun again and again (amlrun_torchrun_compat.sh).

    torchrun_forks.py

Imports torch's torchrun (bench/torchrun-wrapper.py: torch.distributed.run
with its one lookup patched) once, then reads one directory a line on stdin;
each names a run:
    DIR/env    the run's whole environment (`env -0`)
    DIR/argv   torchrun's arguments, each ended by a NUL
and is run in a fresh fork, in the directory DIR/.. (the test's), its
stdout and stderr in DIR/out and DIR/err, under a deadline of 120 s
(SIGALRM ends it).  When it has ended, "DIR STATUS" is printed on stdout
(STATUS: its exit status, 128+N for a signal N).  Runs may overlap (two
nodes of one job): each is answered when it ends.

Why: `import torch` is most of what a torchrun costs here (1.1-1.5 s of
CPU, the workers of these tests import nothing); a fork of a process that
has imported it runs torchrun's own code, unchanged, without that cost.
"""
import os
import runpy
import signal
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
wrapper = runpy.run_path(os.path.join(HERE, "..", "..", "bench", "torchrun-wrapper.py"))
torchrun_main = wrapper["main"]


def run(d):
    """In the fork that runs one torchrun: never returns."""
    code = 1
    try:
        with open(os.path.join(d, "env"), "rb") as f:
            env = [e for e in f.read().split(b"\0") if e]
        with open(os.path.join(d, "argv"), "rb") as f:
            argv = [a.decode() for a in f.read().split(b"\0")[:-1]]
        os.environ.clear()
        for e in env:
            k, _, v = e.partition(b"=")
            os.environb[k] = v
        os.chdir(os.path.dirname(os.path.abspath(d)))
        t = os.open(os.devnull, os.O_RDONLY)  # not the requests' pipe
        os.dup2(t, 0)
        os.close(t)
        for fd, name in ((1, "out"), (2, "err")):
            t = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(t, fd)
            os.close(t)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(120)
        sys.argv = ["torchrun"] + argv
        code = torchrun_main()
        code = 0 if code is None else code
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException as e:  # torchrun's own failure, as its exit status
        sys.stderr.write("torchrun_forks: %r\n" % (e,))
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        pass
    os._exit(code)


def answer(d):
    """In the fork that waits for one run and answers for it."""
    pid = os.fork()
    if pid == 0:
        run(d)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    code = 128 - code if code < 0 else code
    os.write(1, ("%s %d\n" % (d, code)).encode())
    os._exit(0)


for line in sys.stdin:
    d = line.rstrip("\n")
    if not d:
        continue
    if os.fork() == 0:
        answer(d)
    try:  # the answers already given
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass
