#!/usr/bin/env bash
# --hang-timeout across nodes never kills a healthy job (issue 37): a c10d
# job of 2 nodes of the namespace cluster, 2 Python workers a node, every
# rank calling the progress API each 0.2 s (tests/amlrun/healthy_worker.py)
# for longer than the timeout.  The control plane's host decides from
# every node's view; a node whose views stop is late, its ranks unseen,
# not stalled, and the clock restarts when its views come again:
#   (a) node 1's amlrun alone stopped 4 s (its workers go on);
#   (b) node 0's amlrun, the rendezvous host itself, stopped 4 s;
#   (c) node 1 whole (amlrun and its workers) stopped 4 s, node 0's ranks
#       going on without it (no collective here: they do not wait);
#   (d) the ranks of node 0 reporting, node 1's silent and never calling
#       the API (judged by their output, of which they have none);
# each exits 0 on both nodes with no "hang:" line.  Then (e) a real stall
# of rank 3 beside them is still found by the host and named (124).
# What happened is checked, never how long it took.  The heartbeats' dead
# time is 10 s here, not 5: a stop of 4 s is the hang watch's business, and
# with 5 s the last beat before the stop (up to a keepalive earlier) and a
# loaded machine's late SIGCONT made the host's silence pass the dead time
# (both nodes 125, "no heartbeat", in a clean clone's run).
# amldist-test: slow
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
. "$TOP/tests/amlrun/common.sh"
MULTINODE_TIMEOUT=120
multinode_setup 2
export OMP_NUM_THREADS=1 PYTHONPATH=$TOP/python
W=$TOP/tests/amlrun/healthy_worker.py
PY=$(command -v python3)

# start TAG SEC MODE0 MODE1 MODE2 MODE3: both nodes' amlruns in the
# background, their output in $TEST_TMP/TAG/{out,err}.{0,1}.
declare -A pid0 pid1
start() {
    local tag=$1 sec=$2 d=$TEST_TMP/$1
    shift 2
    rm -rf "$d"; mkdir -p "$d"
    local n
    for n in 0 1; do
        on "n$n" $T "$AMLRUN" --hang-timeout "${HT:-2}" --nnodes 2 --nproc-per-node "${NPN:-2}" \
            --rdzv-backend c10d --rdzv-endpoint "n0:$PORT" --rdzv-id "$tag" \
            --rdzv-conf keep_alive_max_attempt=10 \
            --python "$PY" "$W" "$d" "$sec" "$@" >"$d/out.$n" 2>"$d/err.$n" &
        if [ $n = 0 ]; then pid0[$tag]=$!; else pid1[$tag]=$!; fi
    done
    PORT=$((PORT + 7))
}

# rcs TAG: RC="RC0/RC1" once both have ended.
rcs() {
    local r0 r1
    wait "${pid0[$1]}"; r0=$?
    wait "${pid1[$1]}"; r1=$?
    RC=$r0/$r1
}

# amlrun_of TAG NODE: the pid of that node's amlrun (its command line
# names the job's directory and the node by the rendezvous id).
amlrun_of() {
    local p
    for p in $(pgrep -f -- "--rdzv-id $1 .*$TEST_TMP/$1 "); do
        # amlrun itself (not the timeout or the namespace's wrapper that
        # started it, whose command lines hold the same words), in that
        # node's namespace
        [ "$(readlink "/proc/$p/exe")" = "$(readlink -f "$AMLRUN")" ] || continue
        [ "$(ip netns identify "$p" 2>/dev/null)" = "$CLUSTER-n$2" ] && { echo "$p"; return 0; }
    done
    return 1
}
# find_amlrun TAG NODE: amlrun_of, once it runs (60 s at most).
find_amlrun() {
    local i
    for i in $(seq 600); do
        amlrun_of "$@" && return 0
        nap 0.1
    done
    return 1
}

# stop_for TAG SECONDS PID...: once every worker wrote its pid.
stop_for() {
    local tag=$1 s=$2
    shift 2
    wait_for 2 60 "$TEST_TMP/$tag" 'pid\.' || return 1
    nap 1
    kill -STOP "$@"
    nap "$s"
    kill -CONT "$@"
}

healthy() {
    local name=$1 tag=$2 rc=$3 d=$TEST_TMP/$2
    expect_eq "$name: both nodes exit 0" "$rc" 0/0
    check "$name: no hang said on either node" sh -c '! grep -q "hang:" "$0" "$1"' \
        "$d/err.0" "$d/err.1" || diag "$(cat "$d/err.0" "$d/err.1")"
}

# (a) node 1's amlrun alone stopped (one worker a node, as the issue's)
NPN=1 HT=3 start a 9 api api
if p=$(find_amlrun a 1); then stop_for a 4 "$p"; else fail "(a) node 1's amlrun found"; fi
rcs a
healthy "(a) node 1's amlrun stopped 4 s" a "$RC"

# (b) the host's amlrun stopped
start b 9 api api api api
if p=$(find_amlrun b 0); then stop_for b 4 "$p"; else fail "(b) node 0's amlrun found"; fi
rcs b
healthy "(b) the rendezvous host's amlrun stopped 4 s" b "$RC"

# (c) node 1 whole: its amlrun and its workers
start c 9 api api api api
if p=$(find_amlrun c 1) && wait_for 4 60 "$TEST_TMP/c" 'pid\.'; then
    # node 1's workers are ranks 2 and 3 (pids as seen from here: the
    # children of its amlrun's tree)
    kids=$(pgrep -f -- "$W $TEST_TMP/c " | while read -r k; do
        [ "$(ip netns identify "$k" 2>/dev/null)" = "$CLUSTER-n1" ] && echo "$k"; done)
    # shellcheck disable=SC2086
    stop_for c 4 "$p" $kids
else
    fail "(c) node 1's processes found"
fi
rcs c
healthy "(c) node 1 stopped whole 4 s" c "$RC"

# (d) node 1's ranks silent, never calling the API
start d 6 api api silent silent
rcs d
healthy "(d) node 1's ranks silent beside node 0's API ranks" d "$RC"

# (e) a real stall of rank 3 beside calling ranks: found and named
start e 30 api api api stall
rcs e
expect_eq "(e) a stalled rank: both nodes exit 124" "$RC" 124/124
check "(e) the host names rank 3" grep -q "rank 3.*made no progress" "$TEST_TMP/e/err.0" ||
    diag "$(cat "$TEST_TMP/e/err.0")"

check "no process left on any node" leftovers
