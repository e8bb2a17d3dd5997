# shellcheck shell=bash disable=SC2034
# Shared setup of the etcd shell tests (tests/sh/etcd/*.sh): sourced after
# lib.sh.  A real etcd (Debian's etcd-server, 3.4) of 1 or 3 members on
# loopback, each on free ports, its data under this test's temp dir, run
# in the background of this shell and stopped by PID however the test
# ends.  ETCD_EP: the members' HOST:PORT list (--rdzv-endpoint's form);
# etcd_ctl runs etcdctl against them.  Skips the whole test, with the
# reason, where etcd is missing.

# A free TCP port on loopback (the kernel's pick; nothing listens there
# when this returns, and etcd binds it at once).
etcd_free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

ETCD_PIDS=()
ETCD_NAMES=()
ETCD_CLIENT=()

# etcd_up N: N members (1 or 3) up and serving, or "ok - ... # SKIP" and
# exit 0.
etcd_up() {
    local n=$1 i cluster="" name
    name="etcd ($(basename "$0" .sh))"
    for p in etcd etcdctl; do
        if ! have "$p"; then
            skip "$name" "no $p (install etcd-server and etcd-client: scripts/install-deps.sh)"
            exit 0
        fi
    done
    local peer=()
    for ((i = 0; i < n; i++)); do
        ETCD_NAMES[i]=m$i
        ETCD_CLIENT[i]=$(etcd_free_port)
        peer[i]=$(etcd_free_port)
        cluster+="${cluster:+,}m$i=http://127.0.0.1:${peer[i]}"
    done
    local prev
    prev=$(trap -p EXIT | sed "s/^trap -- '\(.*\)' EXIT$/\1/")
    # shellcheck disable=SC2064
    trap "etcd_down; $prev" EXIT
    for ((i = 0; i < n; i++)); do
        mkdir -p "$TEST_TMP/etcd/m$i"
        # Short elections: a member killed is replaced in about a second.
        etcd --name "m$i" --data-dir "$TEST_TMP/etcd/m$i" \
            --listen-client-urls "http://127.0.0.1:${ETCD_CLIENT[i]}" \
            --advertise-client-urls "http://127.0.0.1:${ETCD_CLIENT[i]}" \
            --listen-peer-urls "http://127.0.0.1:${peer[i]}" \
            --initial-advertise-peer-urls "http://127.0.0.1:${peer[i]}" \
            --initial-cluster "$cluster" --initial-cluster-state new \
            --heartbeat-interval 50 --election-timeout 500 \
            --log-level error >"$TEST_TMP/etcd/m$i.log" 2>&1 &
        ETCD_PIDS[i]=$!
    done
    ETCD_EP=""
    for ((i = 0; i < n; i++)); do
        ETCD_EP+="${ETCD_EP:+,}127.0.0.1:${ETCD_CLIENT[i]}"
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

# etcd_ctl ARGS...: etcdctl (v3) against every member alive.
etcd_ctl() {
    ETCDCTL_API=3 etcdctl --endpoints "$ETCD_EP" --dial-timeout 2s "$@"
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
