#!/usr/bin/env bash
# Lost nodes (issue 12): three nodes, the same amlrun line on each (c10d
# rendezvous at n0, fixed --nnodes 3, heartbeats and dead time of
# tests/amlrun/rdzv.sh's RZ_FAST: RZ_DEAD_MS).  A node killed outright (every process in its
# namespace SIGKILLed), the host's node killed, a node frozen (SIGSTOP: its
# connection stays open, only the heartbeats stop) and a node cut off
# (its link down): every agent left stops its workers and exits 125 within
# the dead time (plus the workers' stop), node 0 names the lost node, and
# nothing is left on any node.  As rdzv_lost@etcd, the same on etcd (a
# loss seen by the lease; the host's node is the decider's there).
# amldist-test: etcd (also as rdzv_lost@etcd: tests/amlrun/rdzv.sh's RZ_BACKEND)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
. "$TOP/tests/amlrun/rdzv.sh"
rz_setup 3
EP=$(node_addr n0)
NODES=(n0 n1 n2)

# start_all TAG PORT: the job, every worker running until stopped; 0 once
# all six run.
start_all() {
    local node
    rz_case "$1"
    export RZ_RUN=60 RZ_UNTIL=never
    for node in "${NODES[@]}"; do
        rz_start "$node" --rdzv-backend c10d --rdzv-endpoint "$EP:$2" --nnodes 3 \
            --nproc-per-node 2 --rdzv-conf "$RZ_FAST" "$RZW"
    done
    rz_wait_files rep. 6 && return 0
    fail "$1: the job runs on every node"
    rz_dump
    return 1
}

# others_lost NAME T0 LOST NODE...: each NODE's agent exited 125, having
# seen the loss by the connection or the dead time, its workers stopped by
# SIGTERM (the time since T0, ms, is in the diagnostics).
others_lost() {
    local name=$1 t0=$2 lost=$3 node
    shift 3
    rz_wait "$@"
    diag "$name: $lost lost; the others exit $(rz_rcs "$@")"
    rz_expect "$name: the other agents exit 125" "$(rz_rcs "$@")" "$(rz_want_rcs 125 "$@")"
    for node in "$@"; do
        diag "$name: $node's agent ended $((${END[$node]} - t0)) ms after"
        rz_lost_seen "$name" "$node"
        expect_eq "$name: $node's workers were stopped (SIGTERM)" "$(rz_count "term.$node.")" 2
    done
}

# A whole node killed: every process in n2's namespace SIGKILLed.
if start_all kill-n2 "$PORT"; then
    t0=$(now_ms)
    netns_kill_all "$CLUSTER-n2"
    others_lost "n2 killed" "$t0" n2 n0 n1
    has "n2 killed: node 0 says which node was lost" "$(cat "$RZ_DIR/n0.err")" \
        'lost.*(node 2|n2|10\.231\.0\.12)|(node 2|n2|10\.231\.0\.12).*lost'
fi
rz_wait
no_leftovers "n2 killed"

# The host's node killed: the others lose the host.
if start_all kill-n0 $((PORT + 10)); then
    t0=$(now_ms)
    netns_kill_all "$CLUSTER-n0"
    others_lost "n0 (the host's node) killed" "$t0" n0 n1 n2
    has "n0 killed: n1 says the host was lost" "$(cat "$RZ_DIR/n1.err")" 'lost|host'
fi
rz_wait
no_leftovers "n0 (the host's node) killed"

# A frozen node: its connection stays open, its heartbeats stop.  Thawed
# afterwards, its agent finds the job over: it stops its workers and
# exits 125 too.  With the job's secret (issue 21): the channel's
# connections are lost the same way.
AMLDIST_JOB_TOKEN=$(job_secret lost-secret)
export AMLDIST_JOB_TOKEN
if start_all stop-n1 $((PORT + 20)); then
    t0=$(now_ms)
    # shellcheck disable=SC2046
    kill -STOP $(netns_pids "$CLUSTER-n1") 2>/dev/null
    others_lost "n1 frozen (SIGSTOP)" "$t0" n1 n0 n2
    has "n1 frozen: node 0 says which node was lost" "$(cat "$RZ_DIR/n0.err")" \
        'lost.*(node 1|n1|10\.231\.0\.11)|(node 1|n1|10\.231\.0\.11).*(lost|dead|heartbeat)'
    # shellcheck disable=SC2046
    kill -CONT $(netns_pids "$CLUSTER-n1") 2>/dev/null
    rz_wait n1
    # The spec does not say whether a thawed agent finds the host gone (lost
    # host: 125) or is told it is stale (refused: 2).
    diag "n1 frozen, then thawed: its agent exits ${RC[n1]}: $(grep -m 2 amlrun "$RZ_DIR/n1.err" | tr '\n' ' ')"
    check "n1 frozen, then thawed: its agent exits 125 or 2 (${RC[n1]})" \
        test "${RC[n1]}" = 125 -o "${RC[n1]}" = 2
    expect_eq "n1 frozen, then thawed: its workers were stopped (SIGTERM)" "$(rz_count term.n1.)" 2
fi
rz_wait
no_leftovers "n1 frozen (SIGSTOP)"
unset AMLDIST_JOB_TOKEN

# A node cut off: n1's link down (the host end of its veth pair).  n0
# declares n1 dead, n1 declares the host lost: both sides stop.
if start_all link-n1 $((PORT + 30)); then
    t0=$(now_ms)
    ip link set "$CLUSTER-v1" down
    others_lost "n1's link down" "$t0" n1 n0 n2 n1
    has "n1's link down: node 0 says which node was lost" "$(cat "$RZ_DIR/n0.err")" \
        'lost.*(node 1|n1|10\.231\.0\.11)|(node 1|n1|10\.231\.0\.11).*(lost|dead|heartbeat)'
fi
ip link set "$CLUSTER-v1" up
rz_wait
no_leftovers "n1's link down"

# A fixed-size job with restarts left: a lost node still ends the job (no
# restart: a restart needs every node).  (The decider's rule, the same on
# etcd, where "n2 killed" above has had the loss: c10d's alone.)
if rz_c10d_only "n2 killed, --max-restarts 2" "the rule is host_sm's; the loss is the first case's"; then
rz_case kill-restarts
export RZ_RUN=60 RZ_UNTIL=never
for node in "${NODES[@]}"; do
    rz_start "$node" --rdzv-backend c10d --rdzv-endpoint "$EP:$((PORT + 40))" --nnodes 3 \
        --nproc-per-node 2 --max-restarts 2 --rdzv-conf "$RZ_FAST" "$RZW"
done
if rz_wait_files rep. 6; then
    t0=$(now_ms)
    netns_kill_all "$CLUSTER-n2"
    others_lost "n2 killed, --max-restarts 2" "$t0" n2 n0 n1
    expect_eq "n2 killed, --max-restarts 2: no restart" "$(rz_count rep.)" 6
else
    fail "n2 killed, --max-restarts 2: the job runs"
    rz_dump
fi
rz_wait
no_leftovers "n2 killed, --max-restarts 2"
fi
