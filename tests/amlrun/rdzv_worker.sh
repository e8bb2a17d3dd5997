#!/bin/sh
# The worker of the control-plane tests (tests/sh/rdzv/*.sh).  Every start
# leaves a record file in $RZ_DIR (shared by all the namespace nodes):
#   rep.<host>.<rank>.<id>    one line of key=value: what torchrun's variables
#                             said (written whole, then renamed into place)
#   term.<host>.<rank>.<id>   when SIGTERM came (date +%s%N; every node
#                             shares the one clock)
#   fail.<host>.<rank>.<id>   when this worker failed on purpose
# (<id>: its start time in ns; amlrun may give the workers a PID namespace
# of their own, where every round's pids are the same)
# then prints "rank R runs on HOST" and behaves as told:
#   RZ_FAIL=WHO:STATUS[:DELAY]   that worker (WHO: its RANK, or HOST/LOCAL_RANK)
#                                exits STATUS (KILL: SIGKILLs itself) after
#                                DELAY s (all: once every worker of the
#                                round has its record)
#   RZ_FAIL_ONCE=1               ... only the first time (a marker in RZ_DIR)
#   RZ_FAIL2=WHO:STATUS[:DELAY]  a second one, the same way
#   RZ_STUBBORN=HOST/LOCAL_RANK  that worker records SIGTERM but lives on
#   RZ_RUN=SEC                   then live SEC s (default 0)
#   RZ_UNTIL=NAME                ... or until $RZ_DIR/NAME exists
#   RZ_DONE=ERE                  ... or not at all when the record matches
#                                ERE (" world=3 ", " restart=1 ")
# A SIGTERM records its time and ends the worker (status 143) at once.
d=${RZ_DIR:?RZ_DIR not set}
h=$(hostname)
now() { date +%s%N; }
id=$h.${RANK-x}.$(now)
sp=
trap 'now >"$d/term.$id"; exec 2>/dev/null; [ -n "$sp" ] && kill "$sp"; exit 143' TERM
# nap SEC: a sleep that SIGTERM interrupts at once.
nap() { sleep "$1" & sp=$!; wait "$sp"; sp=; }

# (before the record: the others may act as soon as it is there)
stubborn=0
if [ "${RZ_STUBBORN-}" = "$h/${LOCAL_RANK-}" ]; then
    stubborn=1
    trap 'now >"$d/term.$id"' TERM
    exec 2>/dev/null
fi

printf 'host=%s rank=%s local=%s lws=%s node=%s group=%s gws=%s world=%s role_rank=%s role_world=%s addr=%s port=%s restart=%s ppid=%s\n' \
    "$h" "${RANK-}" "${LOCAL_RANK-}" "${LOCAL_WORLD_SIZE-}" "${NODE_RANK-}" \
    "${GROUP_RANK-}" "${GROUP_WORLD_SIZE-}" "${WORLD_SIZE-}" "${ROLE_RANK-}" \
    "${ROLE_WORLD_SIZE-}" "${MASTER_ADDR-}" "${MASTER_PORT-}" \
    "${TORCHELASTIC_RESTART_COUNT-}" "$PPID" >"$d/.rep.$id"
mv "$d/.rep.$id" "$d/rep.$id"
echo "rank ${RANK-} runs on $h"

# fail_as SPEC: end as SPEC (WHO:STATUS[:DELAY]) says, if this worker is WHO.
fail_as() {
    fr=${1%%:*}
    rest=${1#*:}
    fs=${rest%%:*}
    fd=0
    [ "$rest" != "$fs" ] && fd=${rest#*:}
    me=${RANK-}
    case $fr in */*) me=$h/${LOCAL_RANK-} ;; esac
    [ "$me" = "$fr" ] || return 0
    if [ -n "${RZ_FAIL_ONCE-}" ] && ! mkdir "$d/failed.$(echo "$fr" | tr / _)" 2>/dev/null; then
        return 0
    fi
    if [ "$fd" = all ]; then
        # This round's records only: an earlier round's are there already.
        n=0
        while [ "$(cat "$d"/rep.* 2>/dev/null | grep -c " restart=${TORCHELASTIC_RESTART_COUNT-} ")" -lt "${WORLD_SIZE:-1}" ] &&
              [ $n -lt 600 ]; do
            nap 0.05
            n=$((n + 1))
        done
    else
        nap "$fd"
    fi
    echo "rank $RANK fails on $h with status $fs (last words)"
    now >"$d/fail.$id"
    [ "$fs" = KILL ] && kill -KILL $$
    exit "$fs"
}
[ -n "${RZ_FAIL-}" ] && fail_as "$RZ_FAIL"
[ -n "${RZ_FAIL2-}" ] && fail_as "$RZ_FAIL2"

run=${RZ_RUN:-0}
[ -n "${RZ_DONE-}" ] && grep -qE -- "$RZ_DONE" "$d/rep.$id" && run=0
if [ $stubborn = 1 ]; then
    # Only SIGKILL ends it (at most RZ_RUN s).  No command substitution
    # here: the SIGTERM sent to the worker's group would end it and the
    # loop with it.
    n=$((${run%.*} * 10))
    while [ "$n" -gt 0 ]; do
        nap 0.1
        n=$((n - 1))
    done
elif [ -n "${RZ_UNTIL-}" ]; then
    # Tenths of a second, at most RZ_RUN s.
    n=$(awk -v s="$run" 'BEGIN { printf "%d", s * 10 }')
    while [ "$n" -gt 0 ] && [ ! -e "$d/$RZ_UNTIL" ]; do
        nap 0.1
        n=$((n - 1))
    done
elif [ "$run" != 0 ]; then
    nap "$run"
fi
exit 0
