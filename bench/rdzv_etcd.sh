#!/usr/bin/env bash
# The etcd rendezvous backend against the number of agents (issue 40):
# bench/rdzv_etcd_bench.c's agents (agent 0, the decider's, a process of
# its own; the others threads of other processes, at nice 19) against one
# etcd member started here (its data on a temp dir; tests/etcd.sh's way),
# keep-alives every 1 s, leases of 5 s (the defaults).  Per N, REPS runs, medians: the
# time to form (the agents' release to the last join), the agents' CPU to
# form per agent, the decider's agent's CPU to form, the steady CPU per
# second of all the agents and of etcd (an idle job: keep-alives), a
# failure stopping all (the fail to the last STOP seen), and the time from
# SIGKILLing the decider's agent to every other agent in the round after
# (the lease's expiry, 5 s, counts in it); "failed" counts runs that did
# not get through.
#     bench/rdzv_etcd.sh [REPS] [SECS] [N...]   (1 5 64 1024)
set -eu
cd "$(dirname "$0")/.."
reps=${1:-1}; secs=${2:-5}; shift $(($# > 2 ? 2 : $#))
agents=${*:-64 1024}
build=${BUILD:-build}
out=$build/bench
if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; then
    echo "# rdzv_etcd: no etcd (install etcd-server and etcd-client: scripts/install-deps.sh)"
    exit 0
fi
make -s BUILD="$build" "$out/rdzv_etcd_bench" >/dev/null
tmp=$(mktemp -d "${TMPDIR:-/tmp}/amldist-bench.XXXXXX")
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cp=$(port) pp=$(port)
etcd --name b --data-dir "$tmp/etcd" --listen-client-urls "http://127.0.0.1:$cp" \
    --advertise-client-urls "http://127.0.0.1:$cp" --listen-peer-urls "http://127.0.0.1:$pp" \
    --initial-advertise-peer-urls "http://127.0.0.1:$pp" --initial-cluster "b=http://127.0.0.1:$pp" \
    --log-level error >"$tmp/etcd.log" 2>&1 &
epid=$!
trap 'kill $epid 2>/dev/null; wait $epid 2>/dev/null || :; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do
    ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:$cp" endpoint health >/dev/null 2>&1 && break
    sleep 0.1
done
echo "# the etcd backend, N agents on loopback against one etcd member ($(etcd --version | head -1)), $reps runs each, ${secs} s steady; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%6s  %9s  %14s  %14s  %16s  %14s  %8s  %12s  %6s\n' agents "form ms" \
    "agent CPU ms" "decider CPU ms" "agents ms/s" "etcd ms/s" "stop ms" "takeover ms" failed
for n in $agents; do
    : >"$tmp/runs"; bad=0
    for _ in $(seq "$reps"); do
        "$out/rdzv_etcd_bench" "$n" "$secs" "127.0.0.1:$cp" "$epid" >>"$tmp/runs" 2>"$tmp/err" ||
            { bad=$((bad + 1)); tail -n 1 "$tmp/err" >&2; }
        ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:$cp" del --prefix /amldist >/dev/null
    done
    if [ -s "$tmp/runs" ]; then
        med() { sort -g -k"$1","$1" "$tmp/runs" | awk -v c="$1" '{ v[NR] = $c } END { print v[int((NR + 1) / 2)] }'; }
        printf '%6d  %9s  %14s  %14s  %16s  %14s  %8s  %12s  %6s\n' "$n" "$(med 1)" "$(med 2)" \
            "$(med 3)" "$(med 4)" "$(med 5)" "$(med 6)" "$(med 7)" "$bad"
    else
        printf '%6d  %9s  %14s  %14s  %16s  %14s  %8s  %12s  %6s\n' "$n" - - - - - - - "$bad"
    fi
done
