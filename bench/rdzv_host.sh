#!/usr/bin/env bash
# What the rendezvous host itself costs against the number of agents
# (issue 40): bench/rdzv_host_bench.c's host, a process of its own, with
# N-1 agents as threads of another on loopback.  Per N, REPS runs: the
# median of the time to form (the agents' release to the last join), the
# host's CPU to form, its CPU per second idle (heartbeats), with every node
# sending views of RANKS ranks (--hang-timeout's views; 0: left out), and
# its peak RSS; "failed" counts runs that did not form or stop.
#     bench/rdzv_host.sh [REPS] [SECS] [RANKS] [N...]   (1 5 8 64 1024 4096)
set -eu
cd "$(dirname "$0")/.."
reps=${1:-1}; secs=${2:-5}; ranks=${3:-8}; shift $(($# > 3 ? 3 : $#))
agents=${*:-64 1024 4096}
build=${BUILD:-build}
out=$build/bench
make -s BUILD="$build" "$out/rdzv_host_bench" >/dev/null
tmp=$(mktemp -d "${TMPDIR:-/tmp}/amldist-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "# the rendezvous host, N agents on loopback, $reps runs each, ${secs} s a phase, views of $ranks ranks; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg); soft fd limit $(ulimit -Sn)"
printf '%6s  %9s  %12s  %14s  %14s  %8s  %6s\n' agents "form ms" "form CPU ms" \
    "steady ms/s" "views ms/s" "RSS MiB" failed
for n in $agents; do
    : >"$tmp/runs"; bad=0
    for _ in $(seq "$reps"); do
        "$out/rdzv_host_bench" "$n" "$secs" "$ranks" >>"$tmp/runs" 2>"$tmp/err" ||
            { bad=$((bad + 1)); tail -n 1 "$tmp/err" >&2; }
    done
    if [ -s "$tmp/runs" ]; then
        med() { sort -g -k"$1","$1" "$tmp/runs" | awk -v c="$1" '{ v[NR] = $c } END { print v[int((NR + 1) / 2)] }'; }
        printf '%6d  %9s  %12s  %14s  %14s  %8s  %6s\n' "$n" "$(med 1)" "$(med 2)" \
            "$(med 3)" "$(med 4)" "$(med 5)" "$bad"
    else
        printf '%6d  %9s  %12s  %14s  %14s  %8s  %6s\n' "$n" - - - - - "$bad"
    fi
done
