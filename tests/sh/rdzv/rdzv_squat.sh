#!/usr/bin/env bash
# The endpoint squatted by another local user: a stranger's process binds
# the rendezvous port on this machine before root's amlrun starts (c10d
# --rdzv-endpoint, and the static job's control port MASTER_PORT+2).
# amlrun refuses with exit status 2 and a line naming the stranger's uid,
# starts no worker and never connects to it.  A listener of amlrun's own
# user on the port is joined as before (another agent of the job).  In a
# network namespace of this test's own.
# No etcd variant: the TCP host's own port (c10d's alone).
if [ -z "${RDZV_SQUAT_NETNS:-}" ] && unshare -n true 2>/dev/null; then
    exec env RDZV_SQUAT_NETNS=1 unshare -n bash "$0" "$@"
fi
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
. "$TOP/tests/amlrun/stranger.sh"
if [ -z "${RDZV_SQUAT_NETNS:-}" ]; then
    skip "squatted endpoint" "no network namespace (unshare -n)"; exit 0
fi
if ! stranger_setup; then
    skip "squatted endpoint" "not root, or no useradd/runuser"; exit 0
fi
ip link set lo up
d=$TEST_TMP
unset AMLDIST_JOB_TOKEN AMLDIST_JOB_TOKEN_FILE AMLDIST_REQUIRE_SECRET
export XDG_CONFIG_HOME=$d/config
T="timeout -k 5 60"

# squatted NAME PORT ARGS...: the stranger holds PORT; amlrun ARGS is
# refused, naming the uid, without a connection to it.
squatted() {
    local name=$1 port=$2 rc=0
    shift 2
    as_stranger touch "$STRANGER_DIR/$port"
    stranger_listen "$port" "$STRANGER_DIR/$port"
    wait_line "$STRANGER_DIR/$port" listening || diag "$name: the stranger did not listen"
    $T "$AMLRUN" "$@" --nproc-per-node 1 --no-python sh -c 'touch "$0"' "$d/ran.$port" \
        >"$d/out.$port" 2>"$d/err.$port" || rc=$?
    expect_eq "$name: refused (exit status 2)" "$rc" 2
    check "$name: the line names the stranger's uid $STRANGER_UID" \
        grep -q "held by uid $STRANGER_UID, not by this user (uid 0): refused, not joined" "$d/err.$port"
    check "$name: no worker started" test ! -e "$d/ran.$port"
    expect_eq "$name: amlrun never connected to the stranger" \
        "$(grep -c connected "$STRANGER_DIR/$port")" 0
    [ "$rc" = 2 ] || sed 's/^/# stderr: /' "$d/err.$port"
    listener_stop "$STRANGER_DIR/$port"
}

squatted "c10d endpoint squatted by a stranger" 29700 \
    --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:29700 --nnodes 1:2
squatted "static control port squatted by a stranger" 29712 \
    --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --master-port 29710

# The same user's listener: joined as before (it is no agent here, so the
# join then times out: the point is that amlrun connected).
: >"$d/own"
"$TORCH_PY" -c "$LISTENER_PY" 29720 "$d/own" &
wait_line "$d/own" listening || diag "root's own listener did not listen"
rc=0
$T "$AMLRUN" --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:29720 --nnodes 1:2 \
    --rdzv-conf join_timeout=2 --nproc-per-node 1 --no-python true >"$d/own.out" 2>"$d/own.err" || rc=$?
check "the same user's listener on the port: amlrun joins it (connects) as before" \
    grep -q connected "$d/own"
check "the same user's listener: not refused as a stranger's" sh -c '! grep -q "held by uid" "$1"' sh "$d/own.err"
listener_stop "$d/own"
