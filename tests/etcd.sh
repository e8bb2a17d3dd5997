# shellcheck shell=bash disable=SC2034
# Shared setup of the etcd tests (tests/sh/etcd/*.sh, and the rendezvous
# tests of tests/amlrun/rdzv.sh with RZ_BACKEND=etcd): sourced after
# lib.sh.  A real etcd (Debian's etcd-server, 3.4) of 1 or 3 members, run
# in the background of this shell and stopped by PID however the test
# ends, its data under this test's temp dir:
#   etcd_up N            on loopback, each member on free ports;
#   etcd_up_nodes NODE.. one member in each of those nodes of the
#                        namespace cluster (tests/multinode.sh), listening
#                        on the node's cluster address (ports 2379 and
#                        2380: the node's namespace is the cluster's own),
#                        so that agents on the other nodes reach it over
#                        the cluster's network.
# ETCD_EP: the members' HOST:PORT list (--rdzv-endpoint's form); etcd_ctl
# runs etcdctl against them.  Skips the whole test, with the reason, where
# etcd is missing.
# A free TCP port on loopback (the kernel's pick; nothing listens there
# when this returns, and etcd binds it at once).
etcd_free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

ETCD_PIDS=()
ETCD_NAMES=()
ETCD_CLIENT=()
# The namespace of each member (empty: this shell's), for etcd_ctl.
ETCD_NETNS=()

# etcd_need: etcd and etcdctl are here, or "ok - ... # SKIP" and exit 0.
etcd_need() {
    local p
    for p in etcd etcdctl; do
        if ! have "$p"; then
            skip "etcd ($(basename "$0" .sh))" "no $p (install etcd-server and etcd-client: scripts/install-deps.sh)"
            exit 0
        fi
    done
}

# etcd_up N: N members (1 or 3) on loopback, up and serving, or
# "ok - ... # SKIP" and exit 0.
etcd_up() {
    local n=$1 i
    etcd_need
    local addr=() client=() peer=() netns=()
    for ((i = 0; i < n; i++)); do
        addr[i]=127.0.0.1 client[i]=$(etcd_free_port) peer[i]=$(etcd_free_port) netns[i]=
    done
    etcd_start
}

# etcd_up_nodes NODE...: one member in each cluster node (n0, n1, ...), on
# the node's address, up and serving.  Its processes are the cluster's
# store, not the node's: netns_pids leaves them out (below), so that a test
# that kills, freezes or counts a node's processes (netns_kill_all,
# kill -STOP, no_leftovers) leaves the store alone; etcd_kill kills one.
etcd_up_nodes() {
    local i=0 node
    etcd_need
    local addr=() client=() peer=() netns=()
    for node in "$@"; do
        addr[i]=$(node_addr "$node") client[i]=2379 peer[i]=2380 netns[i]=$CLUSTER-$node
        i=$((i + 1))
    done
    local n=$i
    etcd_start
}

# etcd_start: the members of the caller's n, addr, client, peer and netns
# arrays started, and waited for.
etcd_start() {
    local i cluster="" name prev pre
    name="etcd ($(basename "$0" .sh))"
    for ((i = 0; i < n; i++)); do
        ETCD_NAMES[i]=m$i ETCD_CLIENT[i]=${client[i]} ETCD_NETNS[i]=${netns[i]}
        cluster+="${cluster:+,}m$i=http://${addr[i]}:${peer[i]}"
    done
    prev=$(trap -p EXIT | sed "s/^trap -- '\(.*\)' EXIT$/\1/")
    # shellcheck disable=SC2064
    trap "etcd_down; $prev" EXIT
    for ((i = 0; i < n; i++)); do
        mkdir -p "$TEST_TMP/etcd/m$i"
        pre=()
        [ -n "${netns[i]}" ] && pre=(ip netns exec "${netns[i]}")
        # Short elections: a member killed is replaced in about a second.
        # (ip netns exec execs etcd: $! is etcd's PID)
        "${pre[@]}" etcd --name "m$i" --data-dir "$TEST_TMP/etcd/m$i" \
            --listen-client-urls "http://${addr[i]}:${client[i]}" \
            --advertise-client-urls "http://${addr[i]}:${client[i]}" \
            --listen-peer-urls "http://${addr[i]}:${peer[i]}" \
            --initial-advertise-peer-urls "http://${addr[i]}:${peer[i]}" \
            --initial-cluster "$cluster" --initial-cluster-state new \
            --heartbeat-interval 50 --election-timeout 500 \
            --log-level error >"$TEST_TMP/etcd/m$i.log" 2>&1 &
        ETCD_PIDS[i]=$!
    done
    ETCD_EP=""
    for ((i = 0; i < n; i++)); do
        ETCD_EP+="${ETCD_EP:+,}${addr[i]}:${client[i]}"
    done
    local t
    for t in $(seq 100); do
        etcd_ctl endpoint health >/dev/null 2>&1 && return 0
        nap 0.1
    done
    fail "$name: etcd started"
    cat "$TEST_TMP"/etcd/*.log >&2
    exit 1
}

# Sourced after scripts/netns-cluster.sh (tests/multinode.sh): a node's
# processes are those of its namespace but the etcd members'.
if declare -F netns_pids >/dev/null; then
    netns_pids() {
        local p e
        for p in $(ip netns pids "$1" 2>/dev/null); do
            for e in "${ETCD_PIDS[@]}"; do [ "$p" = "$e" ] && continue 2; done
            echo "$p"
        done
    }
fi

# etcd_ctl ARGS...: etcdctl (v3) against every member alive.
# (on a cluster, from the first member's node: the cluster's addresses are
# reached from its nodes only)
etcd_ctl() {
    local pre=()
    [ -n "${ETCD_NETNS[0]:-}" ] && pre=(ip netns exec "${ETCD_NETNS[0]}")
    ETCDCTL_API=3 "${pre[@]}" etcdctl --endpoints "$ETCD_EP" --dial-timeout 2s "$@"
}

# etcd_kill I: member I killed (SIGKILL), its client port left dead.
etcd_kill() {
    kill -KILL "${ETCD_PIDS[$1]}" 2>/dev/null
    wait "${ETCD_PIDS[$1]}" 2>/dev/null
    ETCD_PIDS[$1]=""
}

etcd_down() {
    local p
    for p in "${ETCD_PIDS[@]}"; do
        [ -n "$p" ] && kill -TERM "$p" 2>/dev/null
    done
    for p in "${ETCD_PIDS[@]}"; do
        [ -n "$p" ] && wait "$p" 2>/dev/null
    done
    ETCD_PIDS=()
}

# etcd_left: every key the store holds (none once jobs ended cleanly).
etcd_left() {
    etcd_ctl get "" --prefix --keys-only 2>/dev/null | grep -v '^$' || true
}

# The jobs of the tests: amlruns on loopback, the same line each, their
# output in $OUT/TAG.log.  The test sets OUT, CONF (--rdzv-conf) and
# WORKER (the worker's sh -c script).
declare -A PID
# start TAG RUNID ARGS...: one amlrun in the background (PID[TAG]: the
# timeout(1) above it).
start() {
    local tag=$1 id=$2
    shift 2
    timeout -k 5 60 "$AMLRUN" --rdzv-backend etcd --rdzv-endpoint "$ETCD_EP" --rdzv-id "$id" \
        --rdzv-conf "$CONF" --nproc-per-node 1 "$@" --no-python sh -c "$WORKER" \
        >"$OUT/$tag.log" 2>&1 &
    PID[$tag]=$!
}
# waitall TAG...: their exit statuses in RCS, in order.
waitall() {
    local t r
    RCS=""
    for t in "$@"; do
        wait "${PID[$t]}"
        r=$?
        RCS+="${RCS:+ }$r"
    done
}
# reports: the workers' lines ($OUT/rep.*), sorted.
reports() { cat "$OUT"/rep.* 2>/dev/null | sort; }
# dump: every amlrun's output, as diagnostics.
dump() {
    local f line
    for f in "$OUT"/*.log; do
        diag "--- $f"
        while IFS= read -r line; do diag "$line"; done <"$f"
    done
}
