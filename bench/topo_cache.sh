#!/usr/bin/env bash
# Issue 23's ratios, measured in one run on this machine, each pair
# alternated (A B, then B A, ...) so that a load from elsewhere weighs on
# both sides alike; every figure is the median over the rounds of the
# per-round ratio (and of each side's own value):
#   start   amlrun --nproc-per-node 8 /bin/true: the default (the topology
#           from the per-node cache) vs --topology FILE, an XML export of
#           this machine (CPU time of the whole tree: amlrun and workers);
#           with AMLDIST_TOPOLOGY_CACHE=0 (live discovery) beside them
#   bind    the default launch vs every binding off (wall time)
#   mpirun  mpirun -np 8 amlrun /bin/true vs mpirun -np 8 /bin/true (CPU)
#   relay   8 workers x LINES lines of 64 bytes into a file: amlrun --prefix
#           vs amlrun (plain) vs the pipe floor, each writer piped through
#           its own cat into the same file (wall time)
# usage: bench/topo_cache.sh [ROUNDS] [LINES]   (defaults 20 and 200000;
#        the relay runs ROUNDS/2 rounds, at least 3)
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

echo "# $(OMP_NUM_THREADS= nproc) of $(nproc --all) cores usable, $(uname -r), hwloc $(lstopo-no-graphics --version | awk '{print $2}'), $ROUNDS rounds"
/usr/bin/python3 - "$ROUNDS" "$LINES" "$AMLRUN" "$tmp" "$have_mpirun" <<'PY'
import os, statistics, sys, time

rounds, lines, amlrun, tmp, have_mpirun = (int(sys.argv[1]), int(sys.argv[2]),
                                           sys.argv[3], sys.argv[4],
                                           sys.argv[5] == "1")
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

def pairs(name, cmds, rounds, metric, to_file=False):
    """cmds: [(label, argv, env)]; alternate their order each round."""
    for label, argv, env in cmds:          # warm up (and fill the cache)
        run(argv, env, to_file)
    vals = {label: [] for label, _, _ in cmds}
    for r in range(rounds):
        order = cmds if r % 2 == 0 else list(reversed(cmds))
        for label, argv, env in order:
            w, c = run(argv, env, to_file)
            vals[label].append(w if metric == "wall" else c)
    return vals

def ratio(vals, a, b):
    return statistics.median(x / y for x, y in zip(vals[a], vals[b]))

def show(title, vals, metric, ratios):
    print("\n## %s (%s, median of %d)" % (title, metric,
                                          len(next(iter(vals.values())))))
    for label, v in vals.items():
        print("  %-34s %8.2f ms" % (label, 1000 * statistics.median(v)))
    for a, b in ratios:
        print("  ratio %-28s %8.2f" % (a + " / " + b, ratio(vals, a, b)))

A = [amlrun, "--nproc-per-node", "8"]
off = ["--cpu-bind", "none", "--mem-bind", "none", "--nic-bind", "none",
       "--gpu-bind", "none"]
start = pairs("start", [
    ("default (cache)", A + ["/bin/true"], None),
    ("--topology machine.xml", A + ["--topology", xml, "/bin/true"], None),
    ("cache off (live discovery)", A + ["/bin/true"],
     {"AMLDIST_TOPOLOGY_CACHE": "0"}),
], rounds, "cpu")
show("start of 8x /bin/true", start, "CPU", [
    ("default (cache)", "--topology machine.xml"),
    ("cache off (live discovery)", "--topology machine.xml")])

bind = pairs("bind", [
    ("binding (default)", A + ["/bin/true"], None),
    ("binding off", A + off + ["/bin/true"], None),
], rounds, "wall")
show("launch of 8x /bin/true", bind, "wall", [
    ("binding (default)", "binding off")])

if have_mpirun:
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
else:
    print("\n## mpirun: not installed, skipped")

writer = os.path.join(tmp, "writer.sh")
relay = pairs("relay", [
    ("--prefix", A + ["--cpu-bind", "none", "--prefix", writer], None),
    ("plain", A + ["--cpu-bind", "none", writer], None),
    ("pipe floor (8x writer | cat)", [os.path.join(tmp, "floor.sh")], None),
], max(3, rounds // 2), "wall", to_file=True)
show("relay of 8 x %d lines of 64 bytes into a file" % lines, relay, "wall", [
    ("--prefix", "plain"), ("--prefix", "pipe floor (8x writer | cat)"),
    ("plain", "pipe floor (8x writer | cat)")])
PY
