"""Checker for the amlrun output-integrity test.

usage: outcheck.py FILE STREAM RANKS LINES PREFIX [killmid]
FILE holds what amlrun wrote on one stream (or one rank's log file, with
RANKS a single rank).  Every line must be whole (checksum right, prefix of
its own rank when PREFIX is "prefix"), each rank's lines in order, each
exactly once: LINES per rank.  With killmid, rank 1's last stderr line is
the cut one.  Prints one problem per line and exits 1 if any.
"""
import re
import sys
import zlib

path, stream, ranks, count, prefix = sys.argv[1:6]
stream, count = int(stream), int(count)
ranks = [int(r) for r in ranks.split(",")]
killmid = len(sys.argv) > 6
want_prefix = prefix == "prefix"
line_re = re.compile(rb"^(?:\[(?:rank|default)(\d+)\]:)?R(\d+) S(\d+) N(\d+) (.*) C([0-9a-f]{8})$", re.S)
cut_re = re.compile(rb"^(?:\[(?:rank|default)(\d+)\]:)?R(\d+) S(\d+) N(\d+) .*CUT$", re.S)
problems = []
nxt = {r: 0 for r in ranks}
cut_seen = set()
data = open(path, "rb").read()
lines = data.split(b"\n")
if lines and lines[-1] == b"":
    lines.pop()
for i, ln in enumerate(lines):
    if ln.startswith(b"amlrun: "):
        continue  # amlrun's own notices on stderr
    m = line_re.match(ln)
    if m and zlib.crc32(ln[ln.index(b"R%s S" % m.group(2)):ln.rindex(b" C")]) != int(m.group(6), 16):
        m = None
    cut = None if m else cut_re.match(ln)
    mm = m or cut
    if not mm:
        problems.append(f"line {i + 1}: malformed or split: {ln[:80]!r}...")
        continue
    pr, r, s, n = mm.group(1), int(mm.group(2)), int(mm.group(3)), int(mm.group(4))
    if want_prefix and (pr is None or int(pr) != r):
        problems.append(f"line {i + 1}: prefix {pr!r} on a line of rank {r}")
    if not want_prefix and pr is not None:
        problems.append(f"line {i + 1}: unexpected prefix")
    if s != stream or r not in nxt:
        problems.append(f"line {i + 1}: rank {r} stream {s} does not belong here")
        continue
    if cut:
        if not (killmid and r == 1 and stream == 2 and n == count - 1):
            problems.append(f"line {i + 1}: unexpected cut line of rank {r}")
        cut_seen.add(r)
    if n != nxt[r]:
        problems.append(f"line {i + 1}: rank {r} line {n}, expected {nxt[r]}")
    nxt[r] = n + 1
for r in ranks:
    if nxt[r] != count:
        problems.append(f"rank {r}: {nxt[r]} lines, expected {count}")
if killmid and stream == 2 and 1 in ranks and 1 not in cut_seen:
    problems.append("rank 1: the line cut by SIGKILL is missing")
for p in problems[:20]:
    print(p)
sys.exit(1 if problems else 0)
