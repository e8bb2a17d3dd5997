#!/usr/bin/env bash
# The CPU of N c10d agents on one host (issue 23): N per-node amlruns of
# one job started at once on loopback, `--rdzv-backend c10d --rdzv-endpoint
# 127.0.0.1:PORT --nnodes N --nproc-per-node 1 /bin/true`, as a job's
# agents are on N machines, here all on this one.  Each round runs the job
# once per variant, in an order that alternates (A B C D, then D C B A, ...)
# so that a load from elsewhere weighs on all alike:
#   default        binding on, the topology from the per-node cache
#   binding off    --cpu-bind/--mem-bind/--nic-bind/--gpu-bind none
#   cache off      AMLDIST_TOPOLOGY_CACHE=0: every agent discovers live
#   cold cache     AMLDIST_TOPOLOGY_CACHE=a new empty directory each job:
#                  the first agent discovers, the others wait for its entry
#                  (the node's first job after a boot, or on a new machine)
#   --topology     an XML export of this machine (with lstopo-no-graphics)
# CPU: user+system of every agent and what it waited for (wait4's rusage,
# summed over the N agents); wall: from the first spawn to the last exit.
# Figures are medians over the rounds, ratios the median of the per-round
# ratios.  A fresh port for each job, drawn below the kernel's ephemeral
# range and checked free.
#     bench/agents.sh [ROUNDS] [N]   (defaults 10 and 64)
set -eu
cd "$(dirname "$0")/.."
ROUNDS=${1:-10}
N=${2:-64}
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
AMLRUN=${AMLRUN:-$BUILD/bin/amlrun}
[ -x "$AMLRUN" ] || { echo "bench: build $AMLRUN first (make)" >&2; exit 1; }
export OMP_NUM_THREADS=1 # no notice from amlrun in the timings
unset CUDA_VISIBLE_DEVICES HWLOC_XMLFILE AMLDIST_TOPOLOGY_CACHE AMLDIST_JOB_TOKEN
tmp=$(mktemp -d "${TMPDIR:-/tmp}/amldist-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
xml=
if command -v lstopo-no-graphics >/dev/null &&
    lstopo-no-graphics --of xml "$tmp/machine.xml" 2>/dev/null; then
    xml=$tmp/machine.xml
else
    echo "bench: no lstopo-no-graphics: the --topology variant left out" >&2
fi
echo "# $N c10d agents on loopback, one /bin/true each; $(env -u OMP_NUM_THREADS nproc) CPUs; $ROUNDS rounds; load $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$ROUNDS" "$N" "$AMLRUN" "$xml" "$tmp" <<'PY'
import os, random, signal, socket, statistics, sys, tempfile, time

rounds, n, amlrun, xml, tmp = (int(sys.argv[1]), int(sys.argv[2]), sys.argv[3],
                               sys.argv[4], sys.argv[5])
devnull = os.open(os.devnull, os.O_RDWR)
lo, hi = (int(x) for x in open("/proc/sys/net/ipv4/ip_local_port_range").read().split())

def free_port():
    """A port below the ephemeral range that nothing holds now."""
    for _ in range(100):
        port = random.randrange(10000, max(10001, lo - 1))
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    sys.exit("bench: no free port below %d" % lo)

def alarm(signum, frame):
    raise TimeoutError

def job(extra, env):
    """(CPU seconds of all agents and their workers, wall seconds)."""
    port = free_port()
    argv = [amlrun] + extra + ["--rdzv-backend", "c10d", "--rdzv-endpoint",
                               "127.0.0.1:%d" % port, "--nnodes", str(n),
                               "--nproc-per-node", "1", "/bin/true"]
    e = dict(os.environ)
    e.update({k: v() if callable(v) else v for k, v in env.items()})
    acts = [(os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, devnull, 1),
            (os.POSIX_SPAWN_DUP2, devnull, 2)]
    pids = set()
    cpu, failed = 0.0, 0
    t0 = time.perf_counter()
    signal.signal(signal.SIGALRM, alarm)
    signal.alarm(120)
    try:
        for _ in range(n):
            pids.add(os.posix_spawn(amlrun, argv, e, file_actions=acts))
        while pids:
            pid, status, ru = os.wait4(-1, 0)
            pids.discard(pid)
            cpu += ru.ru_utime + ru.ru_stime
            failed += os.waitstatus_to_exitcode(status) != 0
    except TimeoutError:
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        for pid in pids:
            os.waitpid(pid, 0)
        sys.exit("bench: %d agents (%s) still running after 120 s" % (n, " ".join(extra)))
    finally:
        signal.alarm(0)
    wall = time.perf_counter() - t0
    if failed:
        return None
    return cpu, wall

def job_ok(extra, env):
    """job(), again on a new port when an agent failed (another program
    may have taken the port between the check and the host's bind)."""
    for _ in range(3):
        r = job(extra, env)
        if r:
            return r
    sys.exit("bench: agents (%s) failed three times" % " ".join(extra))

off = ["--cpu-bind", "none", "--mem-bind", "none", "--nic-bind", "none",
       "--gpu-bind", "none"]
variants = [("default (cache)", [], {}),
            ("binding off", off, {}),
            ("cache off (live discovery)", [], {"AMLDIST_TOPOLOGY_CACHE": "0"}),
            ("cold cache (one discovers)", [],
             {"AMLDIST_TOPOLOGY_CACHE": lambda: tempfile.mkdtemp(dir=tmp)})]
if xml:
    variants.append(("--topology machine.xml", ["--topology", xml], {}))
for _, extra, env in variants:  # warm up (and fill the cache)
    job_ok(extra, env)
cpu = {v[0]: [] for v in variants}
wall = {v[0]: [] for v in variants}
for r in range(rounds):
    for label, extra, env in (variants if r % 2 == 0 else variants[::-1]):
        c, w = job_ok(extra, env)
        cpu[label].append(c)
        wall[label].append(w)

def ratio(a, b):
    return statistics.median(x / y for x, y in zip(cpu[a], cpu[b]))

print("%-30s %10s %12s %10s" % ("", "CPU, ms", "per agent", "wall, ms"))
for label in cpu:
    c = statistics.median(cpu[label])
    print("%-30s %10.1f %12.2f %10.1f" % (label, 1000 * c, 1000 * c / n,
                                          1000 * statistics.median(wall[label])))
pairs = [("default (cache)", "binding off"),
         ("cache off (live discovery)", "binding off"),
         ("cold cache (one discovers)", "binding off")]
if xml:
    pairs += [("default (cache)", "--topology machine.xml"),
              ("cache off (live discovery)", "--topology machine.xml")]
for a, b in pairs:
    print("CPU ratio %-44s %6.2f" % (a + " / " + b, ratio(a, b)))
PY
