#!/usr/bin/env bash
# Every figure of README.md's Benchmarks section (`make bench`): each
# bench/*.sh with the arguments the README names, after the date and the
# machine, since the peers (mpirun, torchrun, srun where a Slurm answers)
# are measured in the same runs and only figures of one run compare.
#     bench/all.sh [--smoke] [NAME...]
# --smoke: each at its smallest size, for tests/sh/bench/bench_smoke.sh
# (that it still builds and runs, no figure worth keeping).  NAME: one of
# the list below (default: all of them).
set -u
cd "$(dirname "$0")/.." || exit 2
smoke=0
[ "${1:-}" = --smoke ] && { smoke=1; shift; }

# name, the README's arguments, the smallest ones.
BENCHES="
launch|10 200000|1 100
launch_floor|30|3
binding|30|1
bootstrap|7|1 129 2
nodecheck|20|1
rdzv_peers|5|1
rdzv|7|1 2
rdzv_host|3 5 8 64 1024 4096|1 1 2 4
rdzv_etcd|1 5 64 1024|1 1 3
rdzv_side|1 5 64 1024 4096|--one 1 1 3
agents|10 64|1 2
topo_cache|20 200000|1 100
hang|5 2 64|1 1 4
progress|7 2000000|1 1000
chan|1000|2
stacks_capture|64|4
tty_relay|20 200000|1 100"

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'); $(env -u OMP_NUM_THREADS nproc) of $(nproc --all) CPUs usable," \
    "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1); $(uname -sr);" \
    "load $(cut -d' ' -f1-3 /proc/loadavg)"
rc=0
while IFS='|' read -r name full small; do
    [ -n "$name" ] || continue
    if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx "$name"; then continue; fi
    args=$full
    [ "$smoke" = 1 ] && args=$small
    echo
    echo "## bench/$name.sh $args"
    # (stdin is the list above: mpirun would pass it on to a rank)
    # shellcheck disable=SC2086
    if ! bash "bench/$name.sh" $args </dev/null; then
        echo "bench/$name.sh $args failed" >&2
        rc=1
    fi
done <<<"$BENCHES"
exit $rc
