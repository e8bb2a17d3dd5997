#!/usr/bin/env bash
# The etcd rendezvous backend against the number of agents (issue 40):
# bench/rdzv_etcd_bench.c's agents (agent 0, the decider's, a process of
# its own; the others threads of other processes, at nice 19) against an
# etcd of MEMBERS members (1 or 3) started here on loopback, tests/etcd.sh's
# way (their data on a temp dir of TMPDIR, its file system said in the
# header: /dev/shm is a tmpfs, no fsync's wait; 3: heartbeats of 50 ms, elections of
# 500 ms), keep-alives every 1 s, leases of 5 s (the defaults).  Per N,
# REPS runs, medians: the time to form (the agents' release to the last
# join), the agents' CPU to form per agent, the decider's agent's CPU to
# form, the steady CPU per second of all the agents and of etcd (every
# member; an idle job: keep-alives), a failure stopping all (the fail to
# the last STOP seen), and the time from SIGKILLing the decider's agent to
# every other agent in the round after (the lease's expiry, 5 s, counts in
# it).  With 3 members, then: the member the agents use (the first of the
# endpoint's list, made the leader before each run: the worst case;
# KILLED=follower: member 1 made the leader, member 0 a follower)
# SIGKILLed with a failure at once, the kill to the last STOP seen and to
# the last agent in the round after, and the agents that noticed anything
# else over the lease's time and 3 s after (0: the job did not notice); the member is
# started again for the next run.  "failed" counts runs that did not get
# through.  MISSES: the lease MISSES keep-alives (of 1 s), not 5 (longer
# leases; the takeover's time is then the lease's).  ERRLOG=FILE: the driver's stderr kept there (the last run's).
#     [MEMBERS=1] [KILLED=leader] [MISSES=5] bench/rdzv_etcd.sh [REPS] [SECS] [N...]
#                                                   (1 5 64 1024)
set -eu
cd "$(dirname "$0")/.."
reps=${1:-1}; secs=${2:-5}; shift $(($# > 2 ? 2 : $#))
agents=${*:-64 1024}
members=${MEMBERS:-1}
case ${KILLED:-leader} in leader) leader=0 ;; follower) leader=1 ;;
    *) echo "rdzv_etcd: KILLED is leader or follower" >&2; exit 2 ;; esac
build=${BUILD:-build}
out=$build/bench
if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; then
    echo "# rdzv_etcd: no etcd (install etcd-server and etcd-client: scripts/install-deps.sh)"
    exit 0
fi
case $members in 1 | 3) ;; *) echo "rdzv_etcd: MEMBERS is 1 or 3" >&2; exit 2 ;; esac
make -s BUILD="$build" "$out/rdzv_etcd_bench" >/dev/null
tmp=$(mktemp -d "${TMPDIR:-/tmp}/amldist-bench.XXXXXX")
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cp=() pp=() pid=() cluster="" ep=""
for ((i = 0; i < members; i++)); do
    cp[i]=$(port) pp[i]=$(port)
    cluster+="${cluster:+,}m$i=http://127.0.0.1:${pp[i]}"
    ep+="${ep:+,}127.0.0.1:${cp[i]}"
done
# member I started (again: its data dir kept, it rejoins the cluster).
member() {
    local i=$1
    etcd --name "m$i" --data-dir "$tmp/m$i" --listen-client-urls "http://127.0.0.1:${cp[i]}" \
        --advertise-client-urls "http://127.0.0.1:${cp[i]}" --listen-peer-urls "http://127.0.0.1:${pp[i]}" \
        --initial-advertise-peer-urls "http://127.0.0.1:${pp[i]}" --initial-cluster "$cluster" \
        --initial-cluster-state new --heartbeat-interval 50 --election-timeout 500 \
        --log-level error >>"$tmp/m$i.log" 2>&1 &
    pid[i]=$!
    disown "${pid[i]}" # the driver kills member 0: no "Killed" from bash
}
ctl() { ETCDCTL_API=3 etcdctl --endpoints "$ep" --dial-timeout 2s "$@"; }
healthy() {
    for _ in $(seq 200); do
        [ "$(ctl endpoint health 2>&1 | grep -c 'is healthy')" = "$members" ] && return 0
        sleep 0.1
    done
    echo "rdzv_etcd: etcd not healthy" >&2; cat "$tmp"/m*.log >&2; return 1
}
# Member I the leader (its id and the leader's from its `endpoint status`).
lead() {
    local st id leader
    st=$(ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:${cp[$1]}" endpoint status -w json)
    id=$(python3 -c 'import json,sys; print("%x" % json.load(sys.stdin)[0]["Status"]["header"]["member_id"])' <<<"$st")
    leader=$(python3 -c 'import json,sys; print("%x" % json.load(sys.stdin)[0]["Status"]["leader"])' <<<"$st")
    [ "$id" = "$leader" ] || ctl move-leader "$id" >/dev/null
}
cleanup() {
    local p
    for p in "${pid[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${pid[@]}"; do
        while kill -0 "$p" 2>/dev/null; do sleep 0.1; done
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
for ((i = 0; i < members; i++)); do member "$i"; done
healthy
echo "# the etcd backend${MISSES:+ (leases of $MISSES s)}, N agents on loopback against $members etcd member(s)$([ "$members" = 1 ] || echo ", the ${KILLED:-leader} killed") ($(etcd --version | head -1)), $reps runs each, ${secs} s steady; etcd's data on $(stat -f -c %T "$tmp") ($tmp: TMPDIR=/dev/shm for a tmpfs); $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
fmt='%6s  %9s  %12s  %14s  %12s  %10s  %8s  %12s  %15s  %15s  %8s  %6s\n'
# shellcheck disable=SC2059 # the format is the one above
printf "$fmt" agents "form ms" "agent CPU ms" "decider CPU ms" "agents ms/s" "etcd ms/s" \
    "stop ms" "takeover ms" "member stop ms" "member next ms" noticed failed
for n in $agents; do
    : >"$tmp/runs"; bad=0
    for _ in $(seq "$reps"); do
        [ "$members" = 1 ] || lead "$leader"
        "$out/rdzv_etcd_bench" "$n" "$secs" "$ep" "$(IFS=,; echo "${pid[*]}")" ${MISSES:+"$MISSES"} >>"$tmp/runs" 2>"${ERRLOG:-$tmp/err}" ||
            { bad=$((bad + 1)); tail -n 1 "${ERRLOG:-$tmp/err}" >&2; }
        if ! kill -0 "${pid[0]}" 2>/dev/null; then
            member 0
        fi
        healthy
        ctl del --prefix /amldist >/dev/null
    done
    if [ -s "$tmp/runs" ]; then
        med() { sort -g -k"$1","$1" "$tmp/runs" | awk -v c="$1" '{ v[NR] = $c } END { print v[int((NR + 1) / 2)] }'; }
        # shellcheck disable=SC2059
        printf "$fmt" "$n" "$(med 1)" "$(med 2)" "$(med 3)" "$(med 4)" "$(med 5)" "$(med 6)" \
            "$(med 7)" "$(med 8)" "$(med 9)" "$(med 10)" "$bad"
    else
        # shellcheck disable=SC2059
        printf "$fmt" "$n" - - - - - - - - - - "$bad"
    fi
done
