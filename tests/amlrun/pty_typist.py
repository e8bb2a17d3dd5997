"""Types into an interactive bash on a pseudo-terminal as a person does,
for the tests that drive amlrun in a terminal: each step of the script
waits for a text on the terminal, or types a line or a control key, or
waits a while.  Exit 0 when every step was done; 1 with the terminal's
last output when a text did not come within its limit.

    pty_typist.py LOG STEP...
      expect:TEXT     wait (60 s at most) for TEXT on the terminal
      type:LINE       type LINE and Enter
      key:^Z          type a control key (^C, ^Z, ^D, ^\\)
      file:PATH       wait (60 s at most) until PATH exists
      sleep:SECONDS   wait

Everything the terminal showed goes to LOG."""
import os
import pty
import select
import sys
import time

log_path, steps = sys.argv[1], sys.argv[2:]
env = dict(os.environ, PS1="PROMPT> ", TERM="xterm")
pid, fd = pty.fork()
if pid == 0:
    os.execvpe("bash", ["bash", "--norc", "--noprofile", "-i"], env)
seen = b""
log = open(log_path, "wb")


def pump(limit):
    """What the terminal shows within `limit` seconds, into seen."""
    global seen
    r, _, _ = select.select([fd], [], [], limit)
    if not r:
        return
    try:
        chunk = os.read(fd, 65536)
    except OSError:
        chunk = b""
    seen += chunk
    log.write(chunk)
    log.flush()


def until(done, what, limit=60.0):
    end = time.monotonic() + limit
    while not done():
        left = end - time.monotonic()
        if left <= 0:
            sys.stderr.write("pty_typist: %s did not come within %g s; the "
                             "terminal's last output:\n%r\n"
                             % (what, limit, seen[-1500:]))
            sys.exit(1)
        pump(min(left, 0.1))


mark = 0  # expect: looks after what the last expect found
for step in steps:
    kind, _, arg = step.partition(":")
    if kind == "expect":
        want = arg.encode()
        until(lambda: seen.find(want, mark) >= 0, repr(arg))
        mark = seen.find(want, mark) + len(want)
    elif kind == "type":
        os.write(fd, arg.encode() + b"\r")
    elif kind == "key":
        os.write(fd, bytes([ord(arg[-1].upper()) & 0x1f]))
    elif kind == "file":
        until(lambda: os.path.exists(arg), "the file " + arg)
    elif kind == "sleep":
        end = time.monotonic() + float(arg)
        while time.monotonic() < end:
            pump(end - time.monotonic())
    else:
        sys.exit("pty_typist: unknown step " + step)
os.write(fd, b"exit\r")
until(lambda: os.waitpid(pid, os.WNOHANG)[0] != 0, "bash's end", 30)
