#!/usr/bin/env bash
# The output relay in a terminal (issue 38) beside the pipe path: 8
# workers each write LINES lines of 64 bytes, and amlrun's stdout and
# stderr are
#   pipe      a pipe the bench reads (CI logs, `| tee`): the workers' streams
#             are pipes, whole lines relayed, as ever
#   terminal  a pseudo-terminal the bench reads as a terminal emulator
#             would (its ONLCR on): the workers' streams are ptys of their
#             own, live (partial lines shown within 50 ms)
# beside the floor of each, the 8 writers straight on the pipe or the pty
# (no amlrun: what the kernel's pipe and pty cost by themselves); and the
# same on a terminal for progress bars, each writer LINES/10 "\r" updates
# of 64 bytes without a newline, then one.  Wall time, each round's sides
# in an order that turns round by round, medians of ROUNDS rounds and of
# the per-round ratios with their quartiles; every newline the writers
# wrote is counted at the reader, so a side that lost or added a line
# fails the bench.
# usage: bench/tty_relay.sh [ROUNDS] [LINES]   (defaults 20 and 200000)
set -eu
cd "$(dirname "$0")/.."
ROUNDS=${1:-20}
LINES=${2:-200000}
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
AMLRUN=${AMLRUN:-$BUILD/bin/amlrun}
[ -x "$AMLRUN" ] || { echo "bench: build $AMLRUN first (make)" >&2; exit 1; }
export OMP_NUM_THREADS=1 # no notice from amlrun in the timings
tmp=$(mktemp -d /tmp/amldist-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
line=$(printf 'x%.0s' $(seq 63))
printf '#!/bin/sh\nyes "%s" | head -n %s\n' "$line" "$LINES" >"$tmp/lines.sh"
# a bar: LINES/10 updates, each "\r" and 63 bytes in one write (as a bar
# that flushes), then "\n"
cat >"$tmp/bar.c" <<'C'
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    char u[64];
    long n = argc > 1 ? atol(argv[1]) : 1;
    memset(u, '#', sizeof u);
    u[0] = '\r';
    for (long i = 0; i < n; i++)
        if (write(1, u, sizeof u) != (ssize_t)sizeof u)
            return 1;
    return write(1, "\n", 1) == 1 ? 0 : 1;
}
C
cc -O2 -o "$tmp/bar" "$tmp/bar.c"
printf '#!/bin/sh\nexec "%s" %s\n' "$tmp/bar" "$((LINES / 10 > 0 ? LINES / 10 : 1))" >"$tmp/bar.sh"
for w in lines bar; do
    printf '#!/bin/sh\nfor i in 1 2 3 4 5 6 7 8; do "%s" & done; wait\n' "$tmp/$w.sh" >"$tmp/eight-$w.sh"
done
chmod +x "$tmp"/*.sh

echo "# $(env -u OMP_NUM_THREADS nproc) of $(nproc --all) cores usable, $(uname -r), $ROUNDS rounds, 8 x $LINES lines"
/usr/bin/python3 - "$ROUNDS" "$LINES" "$AMLRUN" "$tmp" <<'PY'
import os, signal, statistics, sys, time
sys.path.insert(0, "tests/amlrun")
from ttyscreen import screen

rounds, lines, amlrun, tmp = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
devnull = os.open(os.devnull, os.O_RDWR)
bar_lines = max(lines // 10, 1)


def run(argv, tty, want):
    """Wall seconds of one run, its stdout and stderr on a pipe or a pty
    the bench reads to the end, and the lines that did not come whole
    (split or mixed with another writer's; for bars, the lines beyond
    one a bar).  Every byte must come: the count of '#' and 'x' is
    checked."""
    if tty:
        rd, wr = os.openpty()
    else:
        rd, wr = os.pipe()
    t0 = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, dict(os.environ), file_actions=[
        (os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, wr, 1),
        (os.POSIX_SPAWN_DUP2, wr, 2), (os.POSIX_SPAWN_CLOSE, rd)],
        setsigdef=[signal.SIGPIPE])  # Python ignores it: `yes` would say so
    os.close(wr)
    chunks = []
    while True:
        try:
            b = os.read(rd, 1 << 16)
        except OSError:  # EIO: the pty's last writer is gone
            break
        if not b:
            break
        chunks.append(b)
    _, status, _ = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    os.close(rd)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("bench: %s failed (%d)" % (" ".join(argv), status))
    data = b"".join(chunks)
    # the lines as the terminal shows them: amlrun erases an open line for
    # another rank's and shows it again whole (more bytes, the same screen)
    shown = [l for l in screen(data) if l]
    kind, n = want
    if kind == "lines":
        whole = sum(1 for l in shown if l == b"x" * 63)
        if sum(l.count(b"x") for l in shown) < 63 * whole or data.count(b"x") < 63 * n:
            sys.exit("bench: %s: %d bytes came, not %d" % (" ".join(argv), data.count(b"x"), 63 * n))
        return wall, n - whole
    if data.count(b"#") < 63 * n:
        sys.exit("bench: %s: %d bytes came, not %d" % (" ".join(argv), data.count(b"#"), 63 * n))
    return wall, len(shown) - 8


A = [amlrun, "-q", "--nproc-per-node", "8", "--cpu-bind", "none", "--no-python"]
L, B, EL, EB = (os.path.join(tmp, n) for n in
                ("lines.sh", "bar.sh", "eight-lines.sh", "eight-bar.sh"))
sides = [
    ("pipe: amlrun", A + [L], False, ("lines", 8 * lines)),
    ("terminal: amlrun", A + [L], True, ("lines", 8 * lines)),
    ("pipe: 8 writers, no amlrun", [EL], False, ("lines", 8 * lines)),
    ("terminal: 8 writers, no amlrun", [EL], True, ("lines", 8 * lines)),
    ("terminal: amlrun, bars", A + [B], True, ("bars", 8 * bar_lines)),
    ("terminal: 8 bars, no amlrun", [EB], True, ("bars", 8 * bar_lines)),
]
for label, argv, tty, nl in sides:   # warm up
    run(argv, tty, nl)
vals = {s[0]: [] for s in sides}
split = {s[0]: [] for s in sides}
for r in range(rounds):
    for label, argv, tty, nl in (sides if r % 2 == 0 else sides[::-1]):
        w, k = run(argv, tty, nl)
        vals[label].append(w)
        split[label].append(k)


def ratio_line(a, b):
    rs = [x / y for x, y in zip(vals[a], vals[b])]
    q = statistics.quantiles(rs, n=4)[::2] if len(rs) > 1 else (rs[0], rs[0])
    print("  ratio %-58s %6.2f   (quartiles %.2f-%.2f)" %
          (a + " / " + b, statistics.median(rs), q[0], q[1]))


print("\n## 8 writers x %d lines of 64 bytes, %d bars of %d updates (wall, median of %d)"
      % (lines, 8, bar_lines, rounds))
print("  %-40s %9s    %s" % ("", "wall", "lines not whole (bars: lines broken), median / most"))
for label, v in vals.items():
    print("  %-40s %9.2f ms %9d / %d" % (label, 1000 * statistics.median(v),
                                        statistics.median(split[label]), max(split[label])))
ratio_line("terminal: amlrun", "pipe: amlrun")
ratio_line("pipe: amlrun", "pipe: 8 writers, no amlrun")
ratio_line("terminal: amlrun", "terminal: 8 writers, no amlrun")
ratio_line("terminal: amlrun, bars", "terminal: 8 bars, no amlrun")
PY
