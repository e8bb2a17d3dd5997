#!/usr/bin/env bash
# Hostile peers of a job without a secret, speaking the control plane's
# wire from a script (tests/amlrun/rzpeer.py) on loopback, in a network
# namespace of this test's own:
#  - an impostor host that ends the job with FINISH 0 while this node's
#    workers run: amlrun stops them and exits non-zero (125) with a line
#    saying why, never 0;
#  - an agent whose FAIL text holds newlines, CR and terminal escapes with
#    fake "amlrun:" lines: node 0 prints it with its control characters
#    escaped and every line after the first in its block margin, so that
#    no line of it passes for one of amlrun's own.
# No etcd variant: the TCP host's frames (c10d's alone).
if [ -z "${RDZV_HOSTILE_NETNS:-}" ] && unshare -n true 2>/dev/null; then
    exec env RDZV_HOSTILE_NETNS=1 unshare -n bash "$0" "$@"
fi
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
if [ -z "${RDZV_HOSTILE_NETNS:-}" ]; then
    skip "hostile peers" "no network namespace (unshare -n)"; exit 0
fi
ip link set lo up
d=$TEST_TMP
PEER=$TOP/tests/amlrun/rzpeer.py
# No secret anywhere: the plane these peers attack is the open one.
unset AMLDIST_JOB_TOKEN AMLDIST_JOB_TOKEN_FILE AMLDIST_REQUIRE_SECRET
export XDG_CONFIG_HOME=$d/config
T="timeout -k 5 120"

# ---- an impostor host's FINISH 0 -------------------------------------------
"$TORCH_PY" "$PEER" host 29602 "$d/started" >"$d/host.out" 2>&1 &
hpid=$!
wait_line "$d/host.out" listening || diag "the impostor host did not listen"
rc=0
$T "$AMLRUN" --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port 29600 \
    --nproc-per-node 1 --no-python sh -c 'echo $$ >"$0.tmp"; mv "$0.tmp" "$0"; exec sleep 100' "$d/started" \
    >"$d/imp.out" 2>"$d/imp.err" || rc=$?
wait "$hpid" 2>/dev/null
expect_eq "impostor FINISH 0 while the workers run: amlrun exits 125, not 0" "$rc" 125
check "impostor FINISH 0: the worker had started" test -e "$d/started"
check "impostor FINISH 0: one line says that the workers did not all succeed" \
    grep -q "^amlrun: the job's host at 127.0.0.1:29602 ended the job as a success, but this node's workers did not all succeed (amlrun stopped them for the host): exit status 125" "$d/imp.err"
check "impostor FINISH 0: no worker is left" sh -c '! kill -0 "$(cat "$1")" 2>/dev/null' sh "$d/started"
[ "$rc" = 125 ] || sed 's/^/# stderr: /' "$d/imp.err"

# ---- a forged FAIL text --------------------------------------------------------
printf 'boom\namlrun: fake line\r\033[2K\033[1Gamlrun: job succeeded\nlast \177line\n' >"$d/text"
$T "$AMLRUN" --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --master-port 29610 \
    --nproc-per-node 1 --no-python sleep 100 >"$d/n0.out" 2>"$d/n0.err" &
n0=$!
rc=0
for _ in $(seq 200); do
    "$TORCH_PY" -c 'import socket,sys; socket.create_connection(("127.0.0.1", 29612)).close()' \
        2>/dev/null && break
    sleep 0.05
done
$T "$TORCH_PY" "$PEER" agent 29612 127.0.0.1:29612 "$d/text" >"$d/peer.out" 2>&1 ||
    diag "the peer: $(cat "$d/peer.out")"
wait "$n0" || rc=$?
expect_eq "forged FAIL: node 0 ends the job with the peer's status" "$rc" 42
check "forged FAIL: no line of node 0's stderr begins with the peer's fake amlrun: text" \
    sh -c '! grep -q "^amlrun: fake\|^amlrun: job succeeded" "$1"' sh "$d/n0.err"
check "forged FAIL: no control character but newlines in node 0's stderr" \
    sh -c '! LC_ALL=C grep -q "[[:cntrl:]]" "$1"' sh "$d/n0.err"
check "forged FAIL: the peer's lines in the block's margin, escaped" \
    grep -qxF 'amlrun:   fake line\x0d\x1b[2K\x1b[1Gamlrun: job succeeded' "$d/n0.err"
check "forged FAIL: the first line of the failure after the job's line" \
    grep -q '^amlrun: job failed (exit status 42): first failure: node 1 (127.0.0.1), rank 0: exit status 42$' "$d/n0.err"
check "forged FAIL: DEL escaped" grep -qxF 'amlrun:   last \x7fline' "$d/n0.err"
[ "$rc" = 42 ] || sed 's/^/# stderr: /' "$d/n0.err"
