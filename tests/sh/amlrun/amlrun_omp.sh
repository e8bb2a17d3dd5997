#!/usr/bin/env bash
# OMP_NUM_THREADS, one rule from the library: a rank bound to cores of its
# own gets one thread per core; ranks that share cores (more ranks than
# cores, --cpu-bind numa) or run unbound beside others get 1, as torchrun
# gives several workers; a lone unbound worker gets none; the user's value
# is always kept.  Per node and in place under real mpirun.  The cores come
# from this test's own cpuset: two cpus on two different cores.
. "$(dirname "$0")/../../lib.sh"
if [ ! -x "$AMLRUN" ]; then fail "omp: $AMLRUN not built"; exit 0; fi
unset OMP_NUM_THREADS HWLOC_XMLFILE CUDA_VISIBLE_DEVICES

mine=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
# The first allowed cpu of each of the first two cores: "cpu core" pairs.
pair=$("$TORCH_PY" -c '
import os, sys
allowed = sorted(os.sched_getaffinity(0))
seen = {}
for line in open("/dev/stdin"):
    if line.startswith("#"):
        continue
    cpu, core = map(int, line.split(",")[:2])
    if cpu in allowed and core not in seen:
        seen[core] = cpu
print(",".join(str(c) for c in list(seen.values())[:2]))' < <(lscpu -p=CPU,CORE))
if [ "$(tr , '\n' <<<"$pair" | wc -l)" -lt 2 ]; then
    skip "OMP_NUM_THREADS" "needs 2 allowed cpus on 2 cores (have: $mine)"
    exit 0
fi

probe='echo "$LOCAL_RANK ${OMP_NUM_THREADS-unset}"'
# omp NAME ARGS...: workers' "local-rank value" lines, sorted, space-joined;
# amlrun runs on the two cores of $pair only.
omp() {
    local name=$1; shift
    err=$TEST_TMP/$name.err
    got=$(timeout 60 taskset -c "$pair" "$@" sh -c "$probe" 2>"$err" | sort -n | tr '\n' ' ')
}
noticed() { grep -c 'OMP_NUM_THREADS not set' "$err"; }

omp four "$AMLRUN" --nproc-per-node 4
expect_eq "4 ranks on 2 cores (shared): 1 each" "$got" "0 1 1 1 2 1 3 1 "
expect_eq "4 ranks on 2 cores: the notice, once" "$(noticed)" 1
omp nine "$AMLRUN" --nproc-per-node 9 --cpu-bind exclusive,widen
expect_eq "9 ranks, exclusive,widen on 2 cores: still 1 each" \
    "$(tr ' ' '\n' <<<"$got" | awk 'NR % 2 == 0' | sort -u | tr -d '\n')" 1
omp two "$AMLRUN" --nproc-per-node 2
expect_eq "2 ranks on 2 cores (one each, not shared): 1 each" "$got" "0 1 1 1 "
expect_eq "2 ranks on a core each: no notice (1 is their core)" "$(noticed)" 0
omp one "$AMLRUN" --nproc-per-node 1
expect_eq "1 rank on 2 cores of its own: 2" "$got" "0 2 "
omp numa "$AMLRUN" --nproc-per-node 2 --cpu-bind numa
expect_eq "--cpu-bind numa: 2 ranks share the node's cores: 1 each" "$got" "0 1 1 1 "
expect_eq "--cpu-bind numa: the notice" "$(noticed)" 1
omp node "$AMLRUN" --nproc-per-node 2 --numa-binding node
expect_eq "--numa-binding node: the same" "$got" "0 1 1 1 "
omp none2 "$AMLRUN" --nproc-per-node 2 --cpu-bind none
expect_eq "--cpu-bind none, 2 workers: 1 each (torchrun's)" "$got" "0 1 1 1 "
omp none1 "$AMLRUN" --nproc-per-node 1 --cpu-bind none
expect_eq "--cpu-bind none, 1 worker: not set" "$got" "0 unset "
OMP_NUM_THREADS=7 omp user "$AMLRUN" --nproc-per-node 4
expect_eq "the user's OMP_NUM_THREADS=7 is kept for shared cores" "$got" "0 7 1 7 2 7 3 7 "
expect_eq "the user's value: no notice" "$(noticed)" 0
OMP_NUM_THREADS=7 omp user1 "$AMLRUN" --nproc-per-node 1
expect_eq "the user's OMP_NUM_THREADS=7 is kept for a lone rank" "$got" "0 7 "

# --dry-run shows what a run would set.
out=$(taskset -c "$pair" "$AMLRUN" --dry-run --nproc-per-node 4 true 2>/dev/null |
    grep -o 'OMP_NUM_THREADS=[0-9]*' | sort | uniq -c | tr -s ' ')
expect_eq "--dry-run: 4 ranks on 2 cores show OMP_NUM_THREADS=1" "$out" " 4 OMP_NUM_THREADS=1"

# In place under mpirun: every process plans the node for itself.
if have mpirun; then
    omp mpi4 $MPIRUN -np 4 --bind-to none "$AMLRUN"
    expect_eq "mpirun -np 4, in place, 2 cores: 1 each" "$got" "0 1 1 1 2 1 3 1 "
    omp mpi2 $MPIRUN -np 2 --bind-to none "$AMLRUN"
    expect_eq "mpirun -np 2, in place: a core each, 1 each" "$got" "0 1 1 1 "
    omp mpinone $MPIRUN -np 2 --bind-to none "$AMLRUN" --cpu-bind none
    expect_eq "mpirun -np 2, in place, --cpu-bind none: 1 each" "$got" "0 1 1 1 "
    omp mpiuser $MPIRUN -np 4 --bind-to none -x OMP_NUM_THREADS=3 "$AMLRUN"
    expect_eq "mpirun -x OMP_NUM_THREADS=3: kept" "$got" "0 3 1 3 2 3 3 3 "
else
    skip "OMP_NUM_THREADS under mpirun" "mpirun not installed"
fi
