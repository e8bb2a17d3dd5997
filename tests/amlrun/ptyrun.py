"""Runs a command in a pseudo-terminal as a person at a terminal would.

usage: ptyrun.py LOG STEP... -- COMMAND...
The command is a session leader with the pty as its controlling terminal,
in its foreground process group (a login shell's job), the window 40x100.
Every byte it writes to the terminal is appended to LOG.  The steps, in
order, while the output is read all along:
  expect:REGEX  until the output since the last match matches (Python re
                over the bytes, "\\r\\n" read as "\\n": the terminal's ONLCR)
  send:TEXT     type TEXT (backslash escapes: \\n, \\x03 is Ctrl-C, \\x1a
                Ctrl-Z)
  until:SH      until the shell command SH succeeds (run every 20 ms)
  touch:PATH    create PATH
  winsize:RxC   resize the window to R rows, C columns (the kernel sends
                SIGWINCH to the foreground process group)
Then the command's end is waited for and its status printed as "status N"
(128+N when killed by signal N); the exit status is 0, or 1 after a step
that did not come within AMLDIST_PTY_TIMEOUT seconds (default 60; a bound
for a broken run, not a measure: nothing here is timed).
"""
import codecs
import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time

log_path = sys.argv[1]
sep = sys.argv.index("--")
steps, cmd = sys.argv[2:sep], sys.argv[sep + 1:]
limit = float(os.environ.get("AMLDIST_PTY_TIMEOUT", "60"))

pid, fd = pty.fork()
if pid == 0:
    try:
        os.execvp(cmd[0], cmd)
    finally:
        os._exit(127)
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
log = open(log_path, "wb")
seen = b""   # output not yet matched by an expect
status = None


def pump(wait):
    """Read what came within `wait` seconds; False at the terminal's end."""
    global seen
    r, _, _ = select.select([fd], [], [], wait)
    if not r:
        return True
    try:
        data = os.read(fd, 65536)
    except OSError:
        return False
    if not data:
        return False
    log.write(data)
    log.flush()
    seen += data.replace(b"\r\n", b"\n")
    return True


def gone():
    global status
    if status is None:
        p, st = os.waitpid(pid, os.WNOHANG)
        if p == pid:
            status = os.waitstatus_to_exitcode(st)
            status = -status + 128 if status < 0 else status
    return status is not None


def give_up(step):
    sys.stdout.write("ptyrun: %s: not within %g s\n" % (step, limit))
    sys.stdout.write("ptyrun: the output not yet matched: %r\n" % seen[-2000:])
    try:
        os.killpg(pid, 9)
    except OSError:
        pass
    sys.exit(1)


for step in steps:
    kind, _, arg = step.partition(":")
    end = time.monotonic() + limit
    if kind == "expect":
        pat = re.compile(arg.encode(), re.S)
        while True:
            m = pat.search(seen)
            if m:
                seen = seen[m.end():]
                break
            if time.monotonic() > end or not pump(0.05):
                if not pat.search(seen):
                    give_up(step)
    elif kind == "send":
        os.write(fd, codecs.decode(arg, "unicode_escape").encode("latin-1"))
    elif kind == "until":
        while subprocess.call(["sh", "-c", arg]) != 0:
            if time.monotonic() > end:
                give_up(step)
            pump(0.02)
    elif kind == "touch":
        open(arg, "a").close()
    elif kind == "winsize":
        rows, cols = (int(x) for x in arg.split("x"))
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    else:
        sys.exit("ptyrun: unknown step " + step)

end = time.monotonic() + limit
while pump(0.05):
    if time.monotonic() > end:
        give_up("the end")
while not gone():
    if time.monotonic() > end:
        give_up("the end")
    time.sleep(0.02)
print("status %d" % status)
