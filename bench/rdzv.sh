#!/usr/bin/env bash
# Control-plane rendezvous time against the number of agents, on loopback:
# N agents call amldist_rdzv_join() on one endpoint at once (the first to
# bind it hosts), REPS runs each.  Prints a table of the median and worst
# time to the last join returning, and of failure propagation: one agent's
# amldist_rdzv_fail() to the last other agent woken with STOP, and to the
# last agent's amldist_rdzv_next() returning (the job over everywhere).
# Agents are forked processes, timed from the first fork (the first
# columns, and stop/over); "prefork": processes forked beforehand and
# released at once; "threads": threads of one process (no process start or
# scheduling: what the library itself costs, as with one agent a machine).
# "secret": the forked agents' join again with the job's secret
# (AMLDIST_JOB_TOKEN: every connection the channel's, lib/net/chan.h), and
# its ratio to the join without one; "secret thr": the threads' join with
# the secret, and its ratio to theirs without (each forked agent pays
# libcrypto's one-time set-up, about 1 ms of CPU, which N processes on
# few CPUs serialize; agents on N machines pay it side by side).
#     bench/rdzv.sh [REPS] [N...]
set -eu
cd "$(dirname "$0")/.."
reps=${1:-7}; shift $(($# > 0 ? 1 : 0))
agents=${*:-2 4 8 16 32 64}
build=${BUILD:-build}
out=$build/bench
make -s BUILD="$build" "$out/rdzv_bench" >/dev/null
# The runs' figures in a file of this run's own (two runs may overlap).
tmp=$(mktemp -d "${TMPDIR:-/tmp}/amldist-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "# control-plane rendezvous on loopback, $reps runs each, $(nproc) CPUs; times in ms"
printf '%6s  %9s  %9s  %12s  %12s  %9s  %9s  %9s  %10s  %6s  %10s  %6s\n' agents "join med" \
    "join max" "prefork med" "threads med" "stop med" "stop max" "over med" \
    "secret med" ratio "secret thr" ratio
# med FILE COLUMN: "median worst" of that column
med() { sort -g -k"$2","$2" "$1" | awk -v c="$2" '{ v[NR] = $c } END { printf "%s %s ", v[int((NR + 1) / 2)], v[NR] }'; }
for n in $agents; do
    for mode in fork prefork threads secret secret_threads; do
        arg=${mode#secret_}; [ "$mode" = fork ] || [ "$mode" = secret ] && arg=
        secret=; [ "${mode%_*}" = secret ] && secret=bench-secret-$RANDOM$RANDOM-of-32-bytes-or-more
        env -u AMLDIST_JOB_TOKEN ${secret:+AMLDIST_JOB_TOKEN=$secret} \
            "$out/rdzv_bench" "$n" "$reps" $arg >"$tmp/rdzv_$mode" ||
            { echo "n=$n ($mode) failed" >&2; exit 1; }
    done
    read -r jm jx sm sx om _ pm _ tm _ km _ kt _ <<<"$(med "$tmp/rdzv_fork" 1; med "$tmp/rdzv_fork" 2; med "$tmp/rdzv_fork" 3; med "$tmp/rdzv_prefork" 1; med "$tmp/rdzv_threads" 1; med "$tmp/rdzv_secret" 1; med "$tmp/rdzv_secret_threads" 1)"
    ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
    printf '%6d  %9s  %9s  %12s  %12s  %9s  %9s  %9s  %10s  %6s  %10s  %6s\n' "$n" "$jm" "$jx" "$pm" "$tm" "$sm" "$sx" "$om" \
        "$km" "$(ratio "$km" "$jm")" "$kt" "$(ratio "$kt" "$tm")"
done
