#!/usr/bin/env bash
# What the rendezvous host itself costs against the number of agents
# (issue 40): bench/rdzv_host_bench.c's host, a process of its own, with
# N-1 agents as threads of another on loopback.  Per N, REPS runs: the
# median of the time to form (the agents' release to the last join), the
# host's CPU to form, its CPU per second idle (heartbeats), with every node
# sending views of RANKS ranks (--hang-timeout's views; 0: left out), its
# peak RSS, and a gather of GATHER_KB KiB from every agent (the host's own
# agent asks, as --stacks does; 0: left out): its time, the host process's
# CPU for it, and the answers not whole ("cut"); "failed" counts runs that
# did not form or stop.
#     [GATHER_KB=1] bench/rdzv_host.sh [REPS] [SECS] [RANKS] [N...]
#                                             (1 5 8 64 1024 4096)
set -eu
cd "$(dirname "$0")/.."
reps=${1:-1}; secs=${2:-5}; ranks=${3:-8}; shift $(($# > 3 ? 3 : $#))
agents=${*:-64 1024 4096}
gather_kb=${GATHER_KB:-1}
build=${BUILD:-build}
out=$build/bench
make -s BUILD="$build" "$out/rdzv_host_bench" >/dev/null
tmp=$(mktemp -d "${TMPDIR:-/tmp}/amldist-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "# the rendezvous host, N agents on loopback, $reps runs each, ${secs} s a phase, views of $ranks ranks, gathers of $gather_kb KiB; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg); soft fd limit $(ulimit -Sn)"
fmt='%6s  %9s  %12s  %14s  %14s  %8s  %10s  %14s  %4s  %6s\n'
# shellcheck disable=SC2059 # the format is the one above
printf "$fmt" agents "form ms" "form CPU ms" "steady ms/s" "views ms/s" \
    "RSS MiB" "gather ms" "gather CPU ms" cut failed
for n in $agents; do
    : >"$tmp/runs"; bad=0
    for _ in $(seq "$reps"); do
        "$out/rdzv_host_bench" "$n" "$secs" "$ranks" "$gather_kb" >>"$tmp/runs" 2>"$tmp/err" ||
            { bad=$((bad + 1)); tail -n 1 "$tmp/err" >&2; }
    done
    if [ -s "$tmp/runs" ]; then
        med() { sort -g -k"$1","$1" "$tmp/runs" | awk -v c="$1" '{ v[NR] = $c } END { print v[int((NR + 1) / 2)] }'; }
        # shellcheck disable=SC2059
        printf "$fmt" "$n" "$(med 1)" "$(med 2)" "$(med 3)" "$(med 4)" \
            "$(med 5)" "$(med 6)" "$(med 7)" "$(med 8)" "$bad"
    else
        # shellcheck disable=SC2059
        printf "$fmt" "$n" - - - - - - - - "$bad"
    fi
done
