# shellcheck shell=bash disable=SC2034
# Shared setup of the multi-node shell tests (tests/sh/multinode/*.sh):
# sourced after lib.sh.  Makes a namespace cluster (scripts/netns-cluster.sh)
# torn down however the test ends, or skips the whole test where network
# namespaces cannot be made.

. "$TOP/scripts/netns-cluster.sh"

# multinode_setup K: a K-node cluster, or "ok - ... # SKIP" and exit 0.
multinode_setup() {
    if [ ! -x "$AMLRUN" ]; then
        fail "multi-node: $AMLRUN is built"
        exit 1
    fi
    if ! cluster_up "${1:-2}"; then
        skip "multi-node ($(basename "$0" .sh))" "$NETNS_SKIP"
        exit 0
    fi
    # Every command of these tests runs under a deadline: a hang fails its
    # case, it does not stall the suite past the cluster's teardown.
    T="timeout -k 5 ${MULTINODE_TIMEOUT:-60}"
    # A free-looking port per test run, so that concurrent runs and
    # TIME_WAIT sockets of the last run do not meet.
    PORT=$((20000 + RANDOM % 20000))
    REPORT=$TOP/tests/amlrun/report.sh
}

# want_layout MASTER PORT HOST:NODE_RANK:RANK:LOCAL_RANK... : the report
# lines a correct 2x2 job prints, in rank order (world 4, 2 per node).
want_layout() {
    local master=$1 port=$2 spec host node rank lrank
    shift 2
    for spec in "$@"; do
        IFS=: read -r host node rank lrank <<<"$spec"
        printf '%s RANK=%s LOCAL_RANK=%s NODE_RANK=%s WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 MASTER_ADDR=%s MASTER_PORT=%s\n' \
            "$host" "$rank" "$lrank" "$node" "$master" "$port"
    done
}

# Report lines sorted by rank.
by_rank() { grep -E '^n[0-9] RANK=' | sort -t= -k2,2n; }

# Processes left on any node of the cluster, as "pid command" lines.
leftover_procs() {
    local p
    for p in $(cluster_pids); do
        printf '%s %s\n' "$p" "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"
    done
}

# leftovers: leftover_procs once the job's last processes have had a moment
# (up to 3 s) to end: mpirun may return while its rsh agent on another
# node is still ending (python_multinode saw it once beside other
# programs).  What stays longer is a leftover.
leftovers() { settled 60 0.05 leftover_procs; }
