#!/usr/bin/env bash
# The two rendezvous backends side by side (issue 40), in one run: per N,
# the TCP host (bench/rdzv_host.sh, TCPSTORE=0, no views, no gather) and
# the etcd backend (bench/rdzv_etcd.sh) against one member and against
# three (the member the agents use SIGKILLed: the leader, KILLED's), each
# REPS runs, printed as one table (Markdown): the time to form; the CPU
# to form of the host, or of the decider's agent and of each other agent;
# the steady CPU per second of an idle job (the host; the agents, etcd);
# a failure stopping all (etcd's only: bench/rdzv.sh has the host's); the
# decider's agent SIGKILLed to the next round (with TCP the host is the
# job's: the job ends); the etcd member killed to the STOP of a failure
# at once and to the round after, and the agents that noticed anything.
# --one: etcd of one member only (bench/all.sh --smoke's: the three
# members' row waits out a lease, etcd's request timeout and 8 s more).
#     bench/rdzv_side.sh [--one] [REPS] [SECS] [N...]   (1 5 64 1024 4096)
set -eu
cd "$(dirname "$0")/.."
sets="1 3"
[ "${1:-}" = --one ] && { sets=1; shift; }
reps=${1:-1}; secs=${2:-5}; shift $(($# > 2 ? 2 : $#))
agents=${*:-64 1024 4096}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/amldist-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "# the rendezvous backends side by side, $reps runs each, ${secs} s steady; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg) at the start"
for n in $agents; do
    echo "# $n agents: load $(cut -d' ' -f1-3 /proc/loadavg)"
    TCPSTORE=0 GATHER_KB=0 bash bench/rdzv_host.sh "$reps" "$secs" 0 "$n" >"$tmp/tcp.$n" || :
    for m in $sets; do
        MEMBERS=$m bash bench/rdzv_etcd.sh "$reps" "$secs" "$n" >"$tmp/e$m.$n" || :
    done
done
echo "# done: load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| agents | backend | forms | CPU to form | steady CPU | a failure stops all | the decider's agent killed | the etcd member killed: STOP, round after, noticed | failed |"
echo "|---|---|---|---|---|---|---|---|---|"
# A table's row of N (its first field N; the header and comments not).
rowof() { awk -v n="$2" '$1 == n' "$1"; }
for n in $agents; do
    rowof "$tmp/tcp.$n" "$n" | awk -v n="$n" '{ printf "| %s | TCP host | %s ms | host %s ms | host %s ms/s | - | the job ends | - | %s |\n", n, $2, $3, $4, $NF }'
    for m in $sets; do
        rowof "$tmp/e$m.$n" "$n" | awk -v n="$n" -v m="$m" '{
            printf "| %s | etcd, %d member%s | %s ms | decider %s ms, %s ms an agent | agents %s, etcd %s ms/s | %s ms | %s ms | %s | %s |\n",
                n, m, (m > 1 ? "s" : ""), $2, $4, $3, $5, $6, $7, $8,
                (m > 1 ? $9 " ms, " $10 " ms, " $11 : "-"), $12 }'
    done
done
