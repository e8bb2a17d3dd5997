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
runs=$(mktemp "${TMPDIR:-/tmp}/amldist-bench.XXXXXX")
trap 'rm -f "$runs" "$runs.w"' EXIT
make -s BUILD="${BUILD:-build}" "$out/bootstrap_bench" >/dev/null
echo "# bootstrap exchange of $len bytes on loopback, $reps runs each, $(nproc) CPUs"
printf '%6s  %14s  %13s  %16s  %15s\n' ranks "wall med (ms)" "wall max (ms)" \
    "rank 0 med (ms)" "rank 0 max (ms)"
for n in $ranks; do
    "$out/bootstrap_bench" "$n" "$len" "$reps" >"$runs" || { echo "n=$n failed" >&2; exit 1; }
    sort -n -k1,1 "$runs" | awk '{ w[NR] = $1 } END { printf "%s %s ", w[int((NR + 1) / 2)], w[NR] }' >"$runs.w"
    sort -n -k2,2 "$runs" | awk '{ s[NR] = $2 } END { printf "%s %s\n", s[int((NR + 1) / 2)], s[NR] }' >>"$runs.w"
    read -r wm wx sm sx <"$runs.w"
    printf '%6d  %14s  %13s  %16s  %15s\n' "$n" "$wm" "$wx" "$sm" "$sx"
done
