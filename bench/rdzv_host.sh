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
# did not form or stop.  Beside each N, in the same run, torch's TCPStore
# driven by torchrun's own c10d rendezvous (bench/rdzv_tcpstore.py: the
# store a process, the agents threads; its figures the store's), where
# Debian's python3-torch is installed (TCPSTORE=0: left out; a run over
# TCPSTORE_S seconds, 300, counts as failed).
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
fmt='%7s  %9s  %12s  %14s  %14s  %8s  %10s  %14s  %4s  %6s\n'
# shellcheck disable=SC2059 # the format is the one above
printf "$fmt" agents "form ms" "form CPU ms" "steady ms/s" "views ms/s" \
    "RSS MiB" "gather ms" "gather CPU ms" cut failed
torch_py=${TORCH_PY:-/usr/bin/python3}
tcpstore=${TCPSTORE:-1}
[ "$tcpstore" = 0 ] || "$torch_py" -c 'import torch.distributed' 2>/dev/null ||
    { echo "# TCPStore left out: no torch for $torch_py" >&2; tcpstore=0; }
# row LABEL N COMMAND...: REPS runs of COMMAND, the medians of their lines.
row() {
    local label=$1 n=$2
    shift 2
    : >"$tmp/runs"; bad=0
    for _ in $(seq "$reps"); do
        "$@" >>"$tmp/runs" 2>"$tmp/err" ||
            { bad=$((bad + 1)); tail -n 1 "$tmp/err" >&2; }
    done
    if [ -s "$tmp/runs" ]; then
        med() { sort -g -k"$1","$1" "$tmp/runs" | awk -v c="$1" '{ v[NR] = $c } END { print v[int((NR + 1) / 2)] }'; }
        # shellcheck disable=SC2059
        printf "$fmt" "$label" "$(med 1)" "$(med 2)" "$(med 3)" "$(med 4)" \
            "$(med 5)" "$(med 6)" "$(med 7)" "$(med 8)" "$bad"
    else
        # shellcheck disable=SC2059
        printf "$fmt" "$label" - - - - - - - - "$bad"
    fi
}
for n in $agents; do
    row "$n" "$n" "$out/rdzv_host_bench" "$n" "$secs" "$ranks" "$gather_kb"
    [ "$tcpstore" = 0 ] ||
        row "$n TS" "$n" timeout "${TCPSTORE_S:-300}" "$torch_py" \
            bench/rdzv_tcpstore.py "$n" "$secs"
done
