"""Checks what two ranks wrote through amlrun to a terminal (amlrun_tty).

usage: ttycheck.py LOG LINES [prefix]
Rank 0 wrote LINES lines of [a-jq] characters, rank 1 the same in capitals,
each line in pieces (partial lines shown while they grow).  The terminal
(LOG) is read as a terminal shows it (ttyscreen.py): every line on
the screen must be one whole line one rank wrote, never a piece of one
(amlrun erases an open line to let another rank's through, and shows it
again whole); with "prefix" each starts with that rank's "[rankR]:" and
no other; and each rank's lines, in order, must be exactly what it wrote:
nothing lost, doubled, cut or mixed.  Prints the problems, exit 1.
"""
import re
import sys

from ttyscreen import screen

log, count = sys.argv[1], int(sys.argv[2])
prefixed = len(sys.argv) > 3


def line(r, i):
    digits = "abcdefghij" if r == 0 else "ABCDEFGHIJ"
    fill = "q" if r == 0 else "Q"
    return "".join(digits[int(c)] for c in str(i)) + fill * 8


got = {0: [], 1: []}
problems = []
text = "\n".join(l.decode() for l in screen(open(log, "rb").read()))
for n, ln in enumerate(text.split("\n")):
    if ln.startswith("amlrun: ") or (ln == "" and n == len(text.split("\n")) - 1):
        continue
    pr = None
    if prefixed:
        m = re.match(r"\[rank(\d)\]:", ln)
        if not m:
            problems.append("line %d without its prefix: %r" % (n + 1, ln[:60]))
            continue
        pr, ln = int(m.group(1)), ln[m.end():]
    if ln == "":
        problems.append("line %d empty" % (n + 1))
        continue
    ranks = {0 if c.islower() else 1 for c in ln}
    if len(ranks) != 1 or (pr is not None and ranks != {pr}):
        problems.append("line %d mixes ranks: %r" % (n + 1, ln[:60]))
        continue
    got[ranks.pop()].append(ln)
for r in (0, 1):
    lines = [line(r, i) for i in range(count)]
    if got[r] != lines:
        bad = next((k for k, (a, b) in enumerate(zip(got[r], lines)) if a != b),
                   min(len(got[r]), len(lines)))
        problems.append("rank %d: its lines on the screen are not the ones it "
                        "wrote, whole (the first that differs, %d: %r)"
                        % (r, bad, got[r][bad] if bad < len(got[r]) else None))
for p in problems[:20]:
    print(p)
sys.exit(1 if problems else 0)
