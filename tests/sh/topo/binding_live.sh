#!/usr/bin/env bash
# Live binding on this machine: every worker reads its own /proc/self/status
# (Cpus_allowed_list, Mems_allowed_list) and /proc/self/numa_maps, and what
# the kernel says must be what the plan said.  The expected cpus follow from
# this test's own cpuset: N ranks on N single-thread cores get one core
# each, in order.
. "$(dirname "$0")/../../lib.sh"
if [ ! -x "$AMLRUN" ]; then fail "binding: $AMLRUN not built"; exit 0; fi
unset OMP_NUM_THREADS CUDA_VISIBLE_DEVICES HWLOC_XMLFILE

mine=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
mems=$(sed -n 's/^Mems_allowed_list:[[:space:]]*//p' /proc/self/status)
# The allowed cpus one by one ("0-1,4" -> 0 1 4).
cpus=$("$TORCH_PY" -c '
import sys
out = []
for part in sys.argv[1].split(","):
    a, _, b = part.partition("-")
    out += range(int(a), int(b or a) + 1)
print(" ".join(map(str, out)))' "$mine")
set -- $cpus
ncpu=$#
c0=${1:-}; c1=${2:-}
smt=$(lscpu -p=CORE 2>/dev/null | grep -v '^#' | sort | uniq -d | head -1)
if [ "$ncpu" -lt 2 ] || [ -n "$smt" ]; then
    skip "live binding" "needs 2+ allowed single-thread cores (have: $mine)"
    exit 0
fi

# Each worker prints one line about itself; sorted by local rank.
probe='printf "%s cpus=%s mems=%s env=%s omp=%s pol=%s\n" "$LOCAL_RANK" \
  "$(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)" \
  "$(sed -n "s/^Mems_allowed_list:[[:space:]]*//p" /proc/self/status)" \
  "${AMLDIST_CPUS-}" "${OMP_NUM_THREADS-}" \
  "$(head -1 /proc/self/numa_maps | cut -d" " -f2)"'

run() { # run NAME amlrun-args...: workers' lines sorted into $out
    local name=$1; shift
    out=$TEST_TMP/$name.out; err=$TEST_TMP/$name.err
    if ! timeout 60 "$@" sh -c "$probe" >"$out" 2>"$err"; then
        fail "$name: exit status"; sed 's/^/# /' "$err" | tail -5
    fi
    sort -n -o "$out" "$out"
}
line() { sed -n "$(($1 + 1))p" "$out"; }

run two "$AMLRUN" --nproc-per-node 2 --report-bindings
expect_eq "exclusive: rank 0 on the first core" "$(line 0)" \
    "0 cpus=$c0 mems=$mems env=$c0 omp=1 pol=default"
expect_eq "exclusive: rank 1 on the second core" "$(line 1)" \
    "1 cpus=$c1 mems=$mems env=$c1 omp=1 pol=default"
check "report line names rank 1's cpus" \
    grep -q "^amlrun: rank 1 (local 1): gpu none, cpus $c1 (1 core), numa 0" "$err"

run local "$AMLRUN" --nproc-per-node 2 --mem-bind local
expect_eq "--mem-bind local: MPOL_PREFERRED on node 0" \
    "$(cut -d' ' -f1,6 "$out" | tr '\n' ' ')" "0 pol=prefer:0 1 pol=prefer:0 "
# One rank alone on the node's only NUMA node gets all its cores.
run strict "$AMLRUN" --nproc-per-node 1 --mem-bind strict
expect_eq "--mem-bind strict: MPOL_BIND to node 0, Mems_allowed untouched" \
    "$(line 0)" "0 cpus=$mine mems=$mems env=$mine omp=$ncpu pol=bind:0"

run none "$AMLRUN" --nproc-per-node 2 --cpu-bind none
expect_eq "--cpu-bind none: workers keep amlrun's cpus" \
    "$(line 1 | cut -d' ' -f1-4)" "1 cpus=$mine mems=$mems env="

run list "$AMLRUN" --nproc-per-node 2 --cpu-bind "$c1:$c0"
expect_eq "--cpu-bind LIST: rank 0 gets the first list" \
    "$(line 0 | cut -d' ' -f1-2) $(line 1 | cut -d' ' -f1-2)" \
    "0 cpus=$c1 1 cpus=$c0"

OMP_NUM_THREADS=7 run omp "$AMLRUN" --nproc-per-node 1
expect_eq "OMP_NUM_THREADS set by the user is kept" \
    "$(line 0 | sed 's/.*omp=\([^ ]*\).*/\1/')" 7

out=$TEST_TMP/json.out
timeout 60 "$AMLRUN" --nproc-per-node 2 --report-bindings=json /bin/true \
    >/dev/null 2>"$out"
check "--report-bindings=json: one JSON object per rank" "$TORCH_PY" -c '
import json, sys
objs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
assert [o["local_rank"] for o in objs] == [0, 1], objs
assert objs[1]["cpus"] == sys.argv[2] and objs[1]["cores"] == 1, objs
' "$out" "$c1"

# A dry run plans from an XML file without starting anything (p4d: rank 3
# has GPU 3, the 4th block of 6 cores of NUMA 0, and the EFA beside it).
out=$TEST_TMP/dry.out
timeout 60 "$AMLRUN" --nproc-per-node 8 --dry-run --report-bindings \
    --topology "$TOP/tests/topologies/real/aws-ofi-nccl/p4d-topology.xml" \
    /bin/true >"$out" 2>&1
check "--dry-run --topology: p4d rank 3's plan" grep -q \
    "rank 3 (local 3): gpu 3 0000:20:1d.0, cpus 18-23,66-71 (6 cores), numa 0, nic rdmap32s27:1 PHB" \
    "$out"
check "--dry-run --topology: rank 3's environment" grep -q \
    "AMLDIST_GPU=0000:20:1d.0 AMLDIST_GPU_INDEX=3 AMLDIST_CPUS=18-23,66-71 OMP_NUM_THREADS=6 AMLDIST_NUMA=0 AMLDIST_NIC=rdmap32s27" \
    "$out"

# Per-process mode: mpirun binds each process to a core (its default for 2
# processes); amlrun plans the node and binds rank r to core r, without
# mistaking mpirun's per-process binding for the mpirun trap.
if have mpirun; then
    run mpirun $MPIRUN -np 2 --bind-to core "$AMLRUN" --report-bindings
    expect_eq "per-process mode under mpirun: rank r on core r" \
        "$(cut -d' ' -f1-2 "$out" | tr '\n' ' ')" "0 cpus=$c0 1 cpus=$c1 "
    if grep -q "bind-to none" "$err"; then
        fail "per-process mode: no mpirun-trap warning"; sed 's/^/# /' "$err"
    else ok "per-process mode: no mpirun-trap warning"; fi
else
    skip "per-process mode under mpirun" "mpirun not installed"
fi
