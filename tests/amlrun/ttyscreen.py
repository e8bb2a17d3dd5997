"""What a terminal shows of the bytes written to it, for the checks of
amlrun's terminal relay (tests/amlrun/ttycheck.py, bench/tty_relay.sh):
"\\n" starts a new line, "\\r" goes back to the line's start, ESC [K
erases from the cursor to the line's end (amlrun erases a rank's open line
so that another rank's line gets a line of its own, then shows it again
whole), any other byte is written over what was there.  "\\r\\n" (a pty's
ONLCR) is a newline."""
import re

_TOKEN = re.compile(rb"(\r|\x1b\[K)")


def screen_line(line):
    """The line as the terminal shows it (bytes, no newline in it)."""
    if b"\r" not in line and b"\x1b" not in line:
        return line
    cur, col = bytearray(), 0
    for tok in _TOKEN.split(line):
        if tok == b"\r":
            col = 0
        elif tok == b"\x1b[K":
            del cur[col:]
        elif tok:
            cur[col:col + len(tok)] = tok
            col += len(tok)
    return bytes(cur)


def screen(data):
    """Every line the terminal shows (bytes in, a list of bytes out)."""
    return [screen_line(l) for l in data.replace(b"\r\n", b"\n").split(b"\n")]
