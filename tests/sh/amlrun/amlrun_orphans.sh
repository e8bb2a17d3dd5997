#!/usr/bin/env bash
# No orphans: when amlrun is SIGKILLed, when a worker exits leaving
# children behind, and when a worker's child escaped into its own session,
# no process of the job survives.  Processes are found by a unique marker
# in their environment, which every descendant of amlrun inherits.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"

marker="AMLRUN_TEST_MARKER=orphans-$$-$RANDOM$RANDOM"
d=$TEST_TMP/orphans
mkdir -p "$d"

# Each worker: a child in its group, a grandchild whose parent already
# exited (reparented), then it says ready and waits.
worker='sleep 300 & (sleep 300 &) ; touch "$0/ready.$RANK"; wait'

# --- SIGKILL to amlrun: workers, their children and the orphaned
# grandchildren all die (PR_SET_PDEATHSIG for the workers, the guard for
# the rest of their groups)
env "$marker" "$AMLRUN" --nproc-per-node 3 sh -c "$worker" "$d" &
pid=$!
if wait_for 3 30 "$d" ready.; then
    n=$(marked_pids "$marker" | wc -l)
    # amlrun, its guard, 3 workers with 2 sleeps each
    check "job is running with all its processes ($n)" test "$n" -ge 11
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null
    check "SIGKILL to amlrun: nothing of the job survives" wait_gone "$marker" 20
else
    fail "workers did not start"
fi
left=$(marked_pids "$marker")
[ -n "$left" ] && { diag "left: $left"; ps -o pid,ppid,pgid,args -p $left | sed 's/^/# /'; kill -KILL $left; }

# --- the same with the worker's child in a session of its own: gone when
# the job ends normally (amlrun is a child subreaper and kills strays)
rm -f "$d"/ready.*
env "$marker" "$AMLRUN" --nproc-per-node 2 sh -c 'setsid sleep 300 & sleep 300 & touch "$0/ready.$RANK"; exit 0' "$d"
expect_eq "worker exits leaving children: job exits 0" "$?" 0
check "worker exits leaving children: none of them survives" wait_gone "$marker" 20
left=$(marked_pids "$marker")
[ -n "$left" ] && { diag "left: $left"; kill -KILL $left; }

# --- a failing job: the others and all their children are gone when
# amlrun returns (not some time later)
rm -f "$d"/ready.*
env "$marker" "$AMLRUN" --nproc-per-node 3 sh -c \
    'sleep 300 & touch "$0/ready.$RANK"; [ "$RANK" = 0 ] && { while [ $(ls "$0" | grep -c ready) -lt 3 ]; do sleep 0.01; done; exit 9; }; wait' \
    "$d" 2>/dev/null
expect_eq "failing job: exits 9" "$?" 9
expect_eq "failing job: nothing left when amlrun returns" "$(marked_pids "$marker")" ""
left=$(marked_pids "$marker")
[ -n "$left" ] && kill -KILL $left

# --- every worker leads its own process group, amlrun's is not theirs
out=$("$AMLRUN" --nproc-per-node 2 sh -c 'echo "$$ $(ps -o pgid= -p $$)"')
bad=$(echo "$out" | awk '$1 != $2' | wc -l)
expect_eq "each worker leads its own process group" "$bad" 0
expect_eq "two workers, two groups" "$(echo "$out" | awk '{print $2}' | sort -u | wc -l)" 2
