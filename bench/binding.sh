#!/usr/bin/env bash
# What topology discovery and binding add to starting 8 workers:
#   amlrun --nproc-per-node 8 /bin/true
# with everything off (no topology is read), with the default binding on
# this machine (the topology from the per-node cache + exclusive cores), the
# same with the cache off (live hwloc discovery), with memory binding too,
# and planning from an XML export (AWS p4d, 8 GPUs) - plus the library calls
# alone.  Target: binding adds under 30 ms at 8 ranks.  bench/topo_cache.sh
# gives the ratios of issue 23.
# Usage: bench/binding.sh [runs]   (BUILD=build by default; needs hyperfine
# or falls back to a python3 timing loop).
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
RUNS=${1:-30}
AMLRUN=$BUILD/bin/amlrun
XML=${AMLDIST_TOPOLOGIES:-tests/topologies/real}/aws-ofi-nccl/p4d-topology.xml
[ -x "$AMLRUN" ] || { echo "bench: build $AMLRUN first (make)" >&2; exit 1; }
unset CUDA_VISIBLE_DEVICES HWLOC_XMLFILE AMLDIST_TOPOLOGY_CACHE
export OMP_NUM_THREADS=1 # keeps amlrun's note about it out of the timings

off="--cpu-bind none --mem-bind none --nic-bind none --gpu-bind none"
declare -a names cmds
add() { names+=("$1"); cmds+=("$2"); }
add "binding off (no topology)" "$AMLRUN --nproc-per-node 8 $off /bin/true"
add "default: cached, exclusive" "$AMLRUN --nproc-per-node 8 /bin/true"
add "cache off: live, exclusive" "env AMLDIST_TOPOLOGY_CACHE=0 $AMLRUN --nproc-per-node 8 /bin/true"
add "cached, exclusive + mem local" "$AMLRUN --nproc-per-node 8 --mem-bind local /bin/true"
add "from XML (p4d), plan only" "$AMLRUN --nproc-per-node 8 --dry-run --topology $XML /bin/true"
add "binding off, dry run" "$AMLRUN --nproc-per-node 8 --dry-run $off /bin/true"

cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
echo "== amlrun --nproc-per-node 8 /bin/true, $RUNS runs each (cpus $cpus)"
if command -v hyperfine >/dev/null; then
    args=()
    for i in "${!names[@]}"; do args+=(-n "${names[$i]}" "${cmds[$i]}"); done
    md=$(mktemp /tmp/amldist-bench.XXXXXX.md)
    hyperfine -N -w 3 -r "$RUNS" --export-markdown "$md" "${args[@]}" \
        >/dev/null 2>&1
    cat "$md"
    rm -f "$md"
else
    for i in "${!names[@]}"; do
        python3 - "$RUNS" "${names[$i]}" ${cmds[$i]} <<'PY'
import statistics, subprocess, sys, time
runs, name, cmd = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
t = []
for _ in range(runs):
    s = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t.append((time.perf_counter() - s) * 1000)
print(f"{name:32s} median {statistics.median(t):7.2f} ms  "
      f"mean {statistics.mean(t):7.2f} ms  min {min(t):7.2f} ms")
PY
    done
fi

# The library calls alone: load the topology and plan 8 ranks.
src=$(mktemp /tmp/amldist-bench.XXXXXX.c)
bin=${src%.c}
trap 'rm -f "$src" "$bin"' EXIT
cat >"$src" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "amldist.h"
static double now(void) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
int main(int argc, char **argv) {
    int runs = atoi(argv[1]);
    const char *xml = argc > 2 ? argv[2] : NULL;
    double load = 0, plan = 0;
    for (int i = 0; i < runs; i++) {
        amldist_topo_t *t; amldist_plan_t *p;
        double a = now();
        if (amldist_topo_load(&t, xml, 0)) return 1;
        double b = now();
        if (amldist_plan_compute(t, NULL, 8, &p)) return 1;
        double c = now();
        load += b - a; plan += c - b;
        amldist_plan_free(p); amldist_topo_free(t);
    }
    printf("%-32s load %6.2f ms  plan(8 ranks) %6.3f ms\n",
           xml ? "library, from XML (p4d)" : "library, this machine", load / runs,
           plan / runs);
    return 0;
}
C
cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -o "$bin" "$src" -L"$BUILD/lib" \
    -lamldist -Wl,-rpath,"$BUILD/lib"
echo "== library calls, mean of $RUNS"
"$bin" "$RUNS" # the first load fills the cache, the others read it
AMLDIST_TOPOLOGY_CACHE=0 "$bin" "$RUNS" | sed 's/this machine   /live (no cache)/'
"$bin" "$RUNS" "$XML"
