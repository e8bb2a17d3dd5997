#!/usr/bin/env bash
# Bootstrap exchange time against the number of ranks, on loopback: N forked
# processes (rank 0 started last, so the others retry), one exchange of LEN
# bytes (default 129, an ncclUniqueId with its status byte), REPS runs each.
# Prints a table of the median and worst wall time (first fork to last exit)
# and of rank 0's serving time (listening to last rank served).
#     bench/bootstrap.sh [REPS] [LEN] [N...]
set -eu
cd "$(dirname "$0")/.."
reps=${1:-7}; len=${2:-129}; shift $(($# > 2 ? 2 : $#))
ranks=${*:-2 4 8 16 32 64 128 256}
out=${BUILD:-build}/bench
mkdir -p "$out"
cc -std=c11 -D_GNU_SOURCE -O2 -Iinclude -Ilib $(pkg-config --cflags hwloc) -o "$out/bootstrap_bench" \
    bench/bootstrap_bench.c lib/*/*.c $(pkg-config --libs hwloc) -ldl -lpthread
echo "# bootstrap exchange of $len bytes on loopback, $reps runs each, $(nproc) CPUs"
printf '%6s  %14s  %13s  %16s  %15s\n' ranks "wall med (ms)" "wall max (ms)" \
    "rank 0 med (ms)" "rank 0 max (ms)"
for n in $ranks; do
    "$out/bootstrap_bench" "$n" "$len" "$reps" >"$out/runs" || { echo "n=$n failed" >&2; exit 1; }
    sort -n -k1,1 "$out/runs" | awk '{ w[NR] = $1 } END { printf "%s %s ", w[int((NR + 1) / 2)], w[NR] }' >"$out/w"
    sort -n -k2,2 "$out/runs" | awk '{ s[NR] = $2 } END { printf "%s %s\n", s[int((NR + 1) / 2)], s[NR] }' >>"$out/w"
    read -r wm wx sm sx <"$out/w"
    printf '%6d  %14s  %13s  %16s  %15s\n' "$n" "$wm" "$wx" "$sm" "$sx"
done
