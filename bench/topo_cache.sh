#!/usr/bin/env bash
# Issue 23's ratios, measured in one run on this machine, each pair
# alternated (A B, then B A, ...) so that a load from elsewhere weighs on
# both sides alike; every figure is the median over the rounds of the
# per-round ratio (and of each side's own value), with the quartiles of the
# per-round ratios beside it, so that a noisy figure shows as one:
#   start   amlrun --nproc-per-node 8 /bin/true: the default (the topology
#           from the per-node cache) vs --topology FILE, an XML export of
#           this machine (CPU time of the whole tree: amlrun and workers);
#           with AMLDIST_TOPOLOGY_CACHE=0 (live discovery) beside them
#   bind    the default launch vs every binding off (wall time)
#   mpirun  mpirun -np 8 amlrun /bin/true vs mpirun -np 8 /bin/true (CPU)
#   relay   8 workers x LINES lines of 64 bytes into a file: amlrun --prefix
#           vs amlrun (plain) vs the pipe floor, each writer piped through
#           its own cat into the same file (wall time)
#           (and the CPU of the whole tree beside it)
# usage: bench/topo_cache.sh [ROUNDS] [LINES]   (defaults 20 and 200000;
#        the relay runs ROUNDS rounds too: at 10 its ratio wandered from
#        0.84 to 1.17 between runs).  PAIRS="relay bind" runs only those
#        (start, bind, mpirun, relay; default all).
set -eu
cd "$(dirname "$0")/.."
ROUNDS=${1:-20}
LINES=${2:-200000}
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
AMLRUN=${AMLRUN:-$BUILD/bin/amlrun}
[ -x "$AMLRUN" ] || { echo "bench: build $AMLRUN first (make)" >&2; exit 1; }
command -v lstopo-no-graphics >/dev/null ||
    { echo "bench: needs lstopo-no-graphics (hwloc) for the XML export" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export OMP_NUM_THREADS=1 # no notice from amlrun in the timings
unset CUDA_VISIBLE_DEVICES HWLOC_XMLFILE AMLDIST_TOPOLOGY_CACHE
tmp=$(mktemp -d /tmp/amldist-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

lstopo-no-graphics --of xml "$tmp/machine.xml" 2>/dev/null
writer=$tmp/writer.sh
printf '#!/bin/sh\nyes "%s" | head -n %s\n' "$(printf 'x%.0s' $(seq 63))" "$LINES" >"$writer"
chmod +x "$writer"
floor=$tmp/floor.sh
printf '#!/bin/sh\nfor i in 1 2 3 4 5 6 7 8; do %s | cat & done\nwait\n' "$writer" >"$floor"
chmod +x "$floor"
have_mpirun=0
command -v mpirun >/dev/null && have_mpirun=1

echo "# $(env -u OMP_NUM_THREADS nproc) of $(nproc --all) cores usable, $(uname -r), hwloc $(lstopo-no-graphics --version | awk '{print $2}'), $ROUNDS rounds"
/usr/bin/python3 - "$ROUNDS" "$LINES" "$AMLRUN" "$tmp" "$have_mpirun" \
    "${PAIRS:-start bind mpirun relay}" <<'PY'
import os, statistics, sys, time

rounds, lines, amlrun, tmp, have_mpirun = (int(sys.argv[1]), int(sys.argv[2]),
                                           sys.argv[3], sys.argv[4],
                                           sys.argv[5] == "1")
wanted = sys.argv[6].split()
xml = os.path.join(tmp, "machine.xml")
out = os.path.join(tmp, "out")
devnull = os.open(os.devnull, os.O_RDWR)

def run(argv, env=None, to_file=False):
    """Wall and CPU seconds (user+system of the command and every process
    it waited for) of one run, its output to /dev/null or to a file."""
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600) \
        if to_file else devnull
    e = dict(os.environ)
    e.update(env or {})
    t0 = time.perf_counter()
    pid = os.posix_spawnp(argv[0], argv, e, file_actions=[
        (os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, fd, 1),
        (os.POSIX_SPAWN_DUP2, devnull, 2)])
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    if to_file:
        os.close(fd)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("bench: %s failed (%d)" % (" ".join(argv), status))
    return wall, ru.ru_utime + ru.ru_stime

def pairs(name, cmds, rounds, metric, to_file=False, other=None):
    """cmds: [(label, argv, env)]; alternate their order each round.
    other: a dict to fill with the other metric's values."""
    for label, argv, env in cmds:          # warm up (and fill the cache)
        run(argv, env, to_file)
    vals = {label: [] for label, _, _ in cmds}
    if other is not None:
        other.update({label: [] for label, _, _ in cmds})
    for r in range(rounds):
        order = cmds if r % 2 == 0 else list(reversed(cmds))
        for label, argv, env in order:
            w, c = run(argv, env, to_file)
            vals[label].append(w if metric == "wall" else c)
            if other is not None:
                other[label].append(c if metric == "wall" else w)
    return vals

def ratios(vals, a, b):
    return [x / y for x, y in zip(vals[a], vals[b])]

def ratio(vals, a, b):
    return statistics.median(ratios(vals, a, b))

def quartiles(v):
    return statistics.quantiles(v, n=4)[::2] if len(v) > 1 else (v[0], v[0])

def show(title, vals, metric, pairs_shown):
    print("\n## %s (%s, median of %d)" % (title, metric,
                                          len(next(iter(vals.values())))))
    for label, v in vals.items():
        print("  %-34s %8.2f ms" % (label, 1000 * statistics.median(v)))
    for a, b in pairs_shown:
        q1, q3 = quartiles(ratios(vals, a, b))
        print("  ratio %-44s %6.2f   (quartiles %.2f-%.2f)" %
              (a + " / " + b, ratio(vals, a, b), q1, q3))

A = [amlrun, "--nproc-per-node", "8"]
off = ["--cpu-bind", "none", "--mem-bind", "none", "--nic-bind", "none",
       "--gpu-bind", "none"]
if "start" in wanted:
    start = pairs("start", [
        ("default (cache)", A + ["/bin/true"], None),
        ("--topology machine.xml", A + ["--topology", xml, "/bin/true"], None),
        ("cache off (live discovery)", A + ["/bin/true"],
         {"AMLDIST_TOPOLOGY_CACHE": "0"}),
    ], rounds, "cpu")
    show("start of 8x /bin/true", start, "CPU", [
        ("default (cache)", "--topology machine.xml"),
        ("cache off (live discovery)", "--topology machine.xml")])

if "bind" in wanted:
    bind = pairs("bind", [
        ("binding (default)", A + ["/bin/true"], None),
        ("binding off", A + off + ["/bin/true"], None),
    ], rounds, "wall")
    show("launch of 8x /bin/true", bind, "wall", [
        ("binding (default)", "binding off")])

if "mpirun" in wanted and not have_mpirun:
    print("\n## mpirun: not installed, skipped")
elif "mpirun" in wanted:
    M = ["mpirun", "--oversubscribe", "-np", "8"]
    mp = pairs("mpirun", [
        ("mpirun amlrun", M + [amlrun, "/bin/true"], None),
        ("mpirun (bare)", M + ["/bin/true"], None),
        ("mpirun amlrun, cache off", M + ["-x", "AMLDIST_TOPOLOGY_CACHE=0",
                                          amlrun, "/bin/true"], None),
    ], rounds, "cpu")
    show("mpirun -np 8 ... /bin/true", mp, "CPU", [
        ("mpirun amlrun", "mpirun (bare)"),
        ("mpirun amlrun, cache off", "mpirun (bare)")])

if "relay" in wanted:
    writer = os.path.join(tmp, "writer.sh")
    relay_cpu = {}
    relay = pairs("relay", [
        ("--prefix", A + ["--cpu-bind", "none", "--prefix", writer], None),
        ("plain", A + ["--cpu-bind", "none", writer], None),
        ("pipe floor (8x writer | cat)", [os.path.join(tmp, "floor.sh")], None),
    ], rounds, "wall", to_file=True, other=relay_cpu)
    show("relay of 8 x %d lines of 64 bytes into a file" % lines, relay, "wall", [
        ("--prefix", "plain"), ("--prefix", "pipe floor (8x writer | cat)"),
        ("plain", "pipe floor (8x writer | cat)")])
    show("the same relay, CPU of the whole tree", relay_cpu, "CPU", [
        ("--prefix", "plain"), ("plain", "pipe floor (8x writer | cat)")])
PY
