#!/usr/bin/env bash
# Launch benchmark, side by side on this machine (issue 3):
#   amlrun  --nproc-per-node 8 /bin/true   (default binding: reads the
#           topology with hwloc; and again with every binding off)
#   torchrun --nproc_per_node 8 --no_python /bin/true   (Debian's torch 1.13,
#            through bench/torchrun-wrapper.py: see there for the one patch)
#   mpirun -np 8 --oversubscribe /bin/true
# Median wall time over RUNS runs (hyperfine), median peak RSS over RUNS runs
# (GNU time %M: the largest process of the launcher's tree that it waited
# for), and output throughput with rank prefixes on: 8 workers each write
# LINES lines of 64 bytes, amlrun --prefix vs torchrun --tee 3 vs mpirun
# --tag-output, into a file.
#   usage: bench/launch.sh [RUNS] [LINES]      (defaults 10 and 200000)
set -eu
cd "$(dirname "$0")/.."
RUNS=${1:-10}
LINES=${2:-200000}
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
AMLRUN=${AMLRUN:-$BUILD/bin/amlrun}
TORCHRUN="/usr/bin/python3 $PWD/bench/torchrun-wrapper.py"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export OMP_NUM_THREADS=1 # no notice from amlrun or torchrun in the timings
tmp=$(mktemp -d "${TMPDIR:-/tmp}/amlrun-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

declare -A CMD=(
    [amlrun]="$AMLRUN --nproc-per-node 8 /bin/true"
    [amlrun-nobind]="$AMLRUN --nproc-per-node 8 --cpu-bind none --mem-bind none --nic-bind none --gpu-bind none /bin/true"
    [torchrun]="$TORCHRUN --nproc_per_node 8 --no_python /bin/true"
    [mpirun]="mpirun -np 8 --oversubscribe /bin/true"
)
ORDER="amlrun amlrun-nobind torchrun mpirun"
# srun where a Slurm answers (its RSS is srun's own, not slurmd's or the
# step daemon's).
if command -v srun >/dev/null && timeout 10 sinfo -h -o %D >/dev/null 2>&1; then
    CMD[srun]="srun -n 8 --oversubscribe /bin/true"
    ORDER="$ORDER srun"
fi

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# (OMP_NUM_THREADS, set above, is what nproc would say)
echo "# launch of 8x /bin/true, $RUNS runs each ($(env -u OMP_NUM_THREADS nproc) of $(nproc --all) cores usable, $(uname -r))"
args=()
for name in $ORDER; do args+=(-n "$name" "${CMD[$name]}"); done
# A warm-up run when there are runs to time; not at 1 run, bench_smoke's
# (does the bench still run?), where torchrun's warm-up alone costs seconds.
WARMUP=$((RUNS > 1 ? 1 : 0))
hyperfine -N --style none --warmup "$WARMUP" --runs "$RUNS" --export-json "$tmp/launch.json" "${args[@]}" \
    >"$tmp/hyperfine.txt" 2>&1 || { cat "$tmp/hyperfine.txt"; exit 1; }
declare -A WALL RSS
for name in $ORDER; do
    WALL[$name]=$(/usr/bin/python3 -c "
import json, sys
for r in json.load(open('$tmp/launch.json'))['results']:
    if r['command'] == '$name': print('%.4f' % r['median'])")
    for _ in $(seq "$RUNS"); do
        /usr/bin/time -f %M -o "$tmp/rss" ${CMD[$name]} >/dev/null 2>&1
        cat "$tmp/rss"
    done | median >"$tmp/rss.med"
    RSS[$name]=$(cat "$tmp/rss.med")
done
printf '%-14s %12s %14s\n' launcher "median wall" "median peakRSS"
for name in $ORDER; do
    printf '%-14s %10.1f ms %11.0f KiB\n' "$name" "$(echo "${WALL[$name]} * 1000" | bc -l)" "${RSS[$name]}"
done
a=${WALL[amlrun]}
printf 'amlrun is %.1fx faster than mpirun and %.1fx faster than torchrun\n' \
    "$(echo "${WALL[mpirun]} / $a" | bc -l)" "$(echo "${WALL[torchrun]} / $a" | bc -l)"

echo
echo "# output throughput with prefixes: 8 workers x $LINES lines of 64 bytes, into a file"
writer="$tmp/writer.sh"
printf '#!/bin/sh\nyes "%s" | head -n %s\n' "$(printf 'x%.0s' $(seq 63))" "$LINES" >"$writer"
chmod +x "$writer"
declare -A OUT=(
    [amlrun]="$AMLRUN --nproc-per-node 8 --cpu-bind none --prefix $writer"
    [torchrun]="$TORCHRUN --nproc_per_node 8 --no_python --tee 3 --log_dir $tmp/tlogs $writer"
    [mpirun]="mpirun -np 8 --oversubscribe --tag-output $writer"
)
total=$((8 * LINES))
printf '%-9s %10s %12s %14s\n' launcher seconds "MB/s" "lines in file"
for name in amlrun torchrun mpirun; do
    best=
    for _ in $(seq $((RUNS < 3 ? RUNS : 3))); do
        rm -rf "$tmp/tlogs"
        s=$(date +%s.%N)
        ${OUT[$name]} >"$tmp/out" 2>/dev/null
        e=$(date +%s.%N)
        t=$(echo "$e - $s" | bc -l)
        if [ -z "$best" ] || [ "$(echo "$t < $best" | bc -l)" = 1 ]; then best=$t; fi
    done
    n=$(grep -c 'xxxxxxxx' "$tmp/out" || true)
    printf '%-9s %10.2f %12.1f %14s\n' "$name" "$best" "$(echo "$total * 64 / $best / 1000000" | bc -l)" "$n/$total"
done
