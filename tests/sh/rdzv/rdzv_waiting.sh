#!/usr/bin/env bash
# Never a silent wait (issue 38), real amlruns on loopback:
#  - a node that waits for a missing one says so at least every 10 s
#    (what is awaited, where, for how long), static and c10d; -q says
#    nothing (an agent that finds no host yet says so too: on one machine
#    every agent can host, so that one is not here);
#  - a node whose command is missing (exit 127 at once) tells the others,
#    which end with its reason and its status (127, the first failure's)
#    long before their join timeout (static and
#    c10d, 3 nodes with the third never started; the failing node hosting);
#  - a c10d port held by another program is named as such (silent, another
#    protocol), not "no heartbeat".
# On etcd (a one-member etcd on loopback, tests/etcd.sh) the decider's
# agent's waiting line, beside c10d's, and a node that cannot start there;
# the held port is the TCP host's (c10d's alone).
# amldist-test: slow
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
cd "$TEST_TMP" || exit 1
# No secret note in the way; a 32-byte secret (issue 38's minimum).
export AMLDIST_JOB_TOKEN=00112233445566778899aabbccddeeff00112233
J=(--nproc-per-node 1 --no-python)

# 1. Static, node 1 missing: node 0 says what it waits for, twice in 25 s.
p=$(free_port)
timeout 25 "$AMLRUN" --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 \
    --master-port "$p" "${J[@]}" true 2>static.e
check "static: node 0 names the missing node, the endpoint and the time" \
    grep -q "^amlrun: waiting for 1 of 2 nodes (node 1) at 127.0.0.1:$((p + 2)), 1[0-9] s of 300 s (join timeout)$" static.e
check "static: the line comes again" grep -q "^amlrun: waiting for 1 of 2 nodes (node 1) at .*, 2[0-9] s of 300 s" static.e
timeout 12 "$AMLRUN" -q --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 \
    --master-port "$p" "${J[@]}" true 2>quiet.e
expect_eq "static under -q: no waiting line" "$(grep -c waiting quiet.e)" 0

# 2. Node 1 first, alone (on one machine it hosts): it names node 0.
timeout 12 "$AMLRUN" --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 \
    --master-port "$p" "${J[@]}" true 2>first.e
check "static, node 1 first: it names node 0" \
    grep -q "^amlrun: waiting for 1 of 2 nodes (node 0) at 127.0.0.1:$((p + 2)), 1[0-9] s of 300 s" first.e

# 3. c10d, 3 nodes, one in: the count, no node ranks (the host gives them).
# And the same on etcd, at the same time (the decider's agent says it).
ETCD=0
if have etcd && have etcdctl; then
    . "$TOP/tests/etcd.sh"
    etcd_up 1
    ETCD=1
    timeout 12 "$AMLRUN" --rdzv-backend etcd --rdzv-endpoint "$ETCD_EP" --rdzv-id w --nnodes 3 \
        "${J[@]}" true 2>etcd.e &
    ew=$!
fi
p=$(free_port)
timeout 12 "$AMLRUN" --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$p" --nnodes 3 \
    "${J[@]}" true 2>c10d.e
check "c10d: the host's agent says it waits for 2 of 3 nodes" \
    grep -q "^amlrun: waiting for 2 of 3 nodes at 127.0.0.1:$p, 1[0-9] s of 300 s (join timeout)$" c10d.e
if [ "$ETCD" = 1 ]; then
    wait "$ew"
    check "etcd: the decider's agent says it waits for 2 of 3 nodes" \
        grep -q "^amlrun: waiting for 2 of 3 nodes at etcd://$ETCD_EP, 1[0-9] s of 300 s (join timeout)$" etcd.e
else
    skip "etcd: the decider's agent says it waits" "no etcd or etcdctl"
fi

# 4. A node that cannot start: node 1's command is missing.  Node 0 (and
# node 2, in the 3-node case, which never comes for the first) ends with
# node 1's reason, far within the 300 s join timeout (the outer bound).
p=$(free_port)
timeout 120 "$AMLRUN" --nnodes 3 --node-rank 0 --master-addr 127.0.0.1 \
    --master-port "$p" "${J[@]}" true 2>f0.e &
n0=$!
nap 1
timeout 120 "$AMLRUN" --nnodes 3 --node-rank 1 --master-addr 127.0.0.1 \
    --master-port "$p" "${J[@]}" ./no-such-script 2>f1.e
expect_eq "static: the failing node exits 127" "$?" 127
wait "$n0"
rc=$?
expect_eq "static: node 0 exits with the first failure's status, node 1's 127 (not 2, not the outer timeout)" "$rc" 127
check "static: node 0 names node 1 and its reason" \
    grep -q "node 1 (127.0.0.1) could not start, exit status 127: ./no-such-script: No such file or directory" f0.e
check "static: the failing node says it tells the others" grep -q "telling the job's other nodes" f1.e

# The failing node is the host (node 0), the other comes later: told when
# it comes, and node 0 waits for it to be told.
p=$(free_port)
timeout 120 "$AMLRUN" --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 \
    --master-port "$p" "${J[@]}" ./no-such-script 2>h0.e &
h0=$!
wait_grep 30 "telling the job's other nodes" h0.e
timeout 120 "$AMLRUN" --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 \
    --master-port "$p" "${J[@]}" true 2>h1.e
rc=$?
expect_eq "failing host: node 1 exits with node 0's status, 127 (not the outer timeout)" "$rc" 127
check "failing host: node 1 names node 0's reason" \
    grep -q "node 0 (127.0.0.1) could not start, exit status 127: ./no-such-script" h1.e
wait "$h0"
expect_eq "failing host: node 0 exits 127 once node 1 was told" "$?" 127

# c10d: the same.
p=$(free_port)
timeout 120 "$AMLRUN" --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$p" --nnodes 2 \
    "${J[@]}" true 2>c0.e &
c0=$!
nap 1
timeout 120 "$AMLRUN" --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$p" --nnodes 2 \
    "${J[@]}" ./no-such-script 2>c1.e
expect_eq "c10d: the failing node exits 127" "$?" 127
wait "$c0"
rc=$?
expect_eq "c10d: the other node exits with the failing node's 127 (not 2, not the outer timeout)" "$rc" 127
check "c10d: it names the failing node's reason" \
    grep -q "a node (127.0.0.1) could not start, exit status 127: ./no-such-script: No such file or directory" c0.e

# etcd: the same.
if [ "$ETCD" = 1 ]; then
    timeout 120 "$AMLRUN" --rdzv-backend etcd --rdzv-endpoint "$ETCD_EP" --rdzv-id m --nnodes 2 \
        "${J[@]}" true 2>e0.e &
    e0=$!
    nap 1
    timeout 120 "$AMLRUN" --rdzv-backend etcd --rdzv-endpoint "$ETCD_EP" --rdzv-id m --nnodes 2 \
        "${J[@]}" ./no-such-script 2>e1.e
    expect_eq "etcd: the failing node exits 127" "$?" 127
    wait "$e0"
    expect_eq "etcd: the other node exits with the failing node's 127" "$?" 127
    check "etcd: it names the failing node's reason" \
        grep -q "a node (127.0.0.1) could not start, exit status 127: ./no-such-script: No such file or directory" e0.e
fi

# 5. A c10d port held by another program: named as such.
hold() { # PORT MODE: a listener that says nothing, or speaks HTTP
    "$TORCH_PY" -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16)
open(sys.argv[3], "w").close()
conns = []
while True:
    c, _ = s.accept()
    if sys.argv[2] == "http":
        c.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\n" * 8)
    conns.append(c)
' "$@" &
}
for mode in silent http; do
    p=$(free_port)
    hold "$p" "$mode" "held.$mode"
    hp=$!
    wait_for 1 30 . "held\.$mode" || fail "$mode listener did not start"
    timeout 120 "$AMLRUN" --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$p" --nnodes 2 \
        "${J[@]}" true 2>held.$mode.e
    rc=$?
    kill "$hp"
    wait "$hp" 2>/dev/null
    expect_eq "port held ($mode): exit 125" "$rc" 125
    check "port held ($mode): the endpoint is not an amlrun rendezvous host" \
        grep -q "rendezvous at 127.0.0.1:$p: the endpoint .*: it is not an amlrun rendezvous host" held.$mode.e
    check "port held ($mode): not a heartbeat" sh -c "! grep -q heartbeat held.$mode.e"
done
check "port held (silent): says it sent nothing" grep -q "accepted the connection and sent nothing" held.silent.e
check "port held (http): says another protocol" grep -q "answered in another protocol" held.http.e
