#!/usr/bin/env bash
# The NCCL-id bootstrap's channel (MASTER_PORT+1, issue 21), real traffic
# through the recording and tampering proxy (tests/amlrun/chanproxy.py) on
# n2: rank 0 of examples/bootstrap_hello on n0, rank 1 on n1 reaching it
# through the proxy, every rank with the job's secret.  The recording holds
# neither the secret nor the blob; the blob altered on the way is an
# integrity error naming the endpoint; the request altered is dropped and
# the rank's next try goes through; rank 1's recording replayed into a
# later exchange, rank 0's replayed to a new rank, and a wrong secret are
# refused, naming what did not prove the secret.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
HELLO=$BUILD/examples/bootstrap_hello
PROXY=$TOP/tests/amlrun/chanproxy.py
if [ ! -x "$HELLO" ]; then
    fail "multi-node channel: $HELLO is built"
    exit 1
fi
multinode_setup 3
EP=$(node_addr n0)
PX=$(node_addr n2)
PP=$((PORT + 100))
SECRET=$(job_secret "bs-secret-$PORT")
export AMLDIST_JOB_TOKEN=$SECRET AMLDIST_BOOTSTRAP_TIMEOUT=6
REC=$TEST_TMP/rec
mkdir -p "$REC"

# rank R NODE ADDR PORT: bootstrap_hello as rank R of 2 on NODE, its master
# at ADDR:PORT (the bootstrap at PORT+1); output in $TEST_TMP/rR.{out,err}.
rank() {
    on "$2" $T env RANK="$1" WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
        MASTER_ADDR="$3" MASTER_PORT="$4" "$HELLO" \
        >"$TEST_TMP/r$1.out" 2>"$TEST_TMP/r$1.err"
}
# proxy ARGS...: the proxy on n2, PX:PP+1 to EP:PORT+1.
proxy() {
    on n2 timeout 60 "$TORCH_PY" "$PROXY" "$PX" $((PP + 1)) "$EP" $((PORT + 1)) "$@" \
        >"$TEST_TMP/proxy.out" 2>"$TEST_TMP/proxy.log" &
    local n=0
    until on n2 ss -Htln "sport = :$((PP + 1))" | grep -q .; do
        ((n++ < 400)) || { fail "the proxy listens"; return 1; }
        sleep 0.05
    done
}
proxy_stop() { netns_kill_all "$CLUSTER-n2"; wait 2>/dev/null; }
# rank0_listens: until rank 0 listens on the bootstrap port (20 s at most).
rank0_listens() {
    local n=0
    until on n0 ss -Htln "sport = :$((PORT + 1))" | grep -q .; do
        ((n++ < 400)) || return 1
        sleep 0.05
    done
}
# exchange: rank 0 on n0, rank 1 on n1 through the proxy; their statuses.
exchange() {
    local rc0=0 rc1=0
    rank 0 n0 "$EP" "$PORT" &
    local p0=$!
    rank0_listens
    rank 1 n1 "$PX" "$PP" || rc1=$?
    wait "$p0" || rc0=$?
    echo "$rc0 $rc1"
}

proxy --record "$REC"
name="the bootstrap through the proxy, untouched"
expect_eq "$name: both ranks get the blob" "$(exchange)" "0 0"
check "$name: rank 1 has rank 0's line" grep -q "rank 1/2 got: hello from rank 0" "$TEST_TMP/r1.out"
proxy_stop
check "$name: the recording has both directions" test -s "$REC/c2s.1" -a -s "$REC/s2c.1"
check "$name: neither the secret nor the blob crosses the wire" \
    sh -c '! grep -qaF -e "$0" -e "hello from rank 0" "$1"/*' "$SECRET" "$REC"

proxy --flip s2c:1
name="the blob altered on the way"
got=$(exchange)
proxy_stop
diag "$name: $(tr '\n' ' ' <"$TEST_TMP/proxy.log") ranks: $got"
check "$name: rank 1 fails ($got)" test "${got#* }" != 0
has() { if grep -qE -- "$3" <<<"$2"; then ok "$1"; else fail "$1"; diag "got: $2"; fi; }
has "$name: rank 1 names the integrity error and the endpoint" "$(cat "$TEST_TMP/r1.err")" \
    "${PX//./\\.}:$((PP + 1)).*integrity error"
check "$name: rank 1 never took the blob" sh -c '! grep -q "got:" "$0"' "$TEST_TMP/r1.out"

proxy --flip c2s:2
name="the request altered on the way"
got=$(exchange)
proxy_stop
diag "$name: $(tr '\n' ' ' <"$TEST_TMP/proxy.log") ranks: $got"
check "$name: the proxy altered it" grep -q "flipped c2s frame 2" "$TEST_TMP/proxy.log"
expect_eq "$name: rank 0 dropped it, rank 1's next try got the blob" "$got" "0 0"

# Rank 1's recording replayed into a later exchange with the same secret.
name="rank 1's bytes replayed into a later exchange"
rank 0 n0 "$EP" "$PORT" &
p0=$!
rank0_listens
on n2 timeout 20 "$TORCH_PY" -c '
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
s.sendall(open(sys.argv[3], "rb").read())
s.settimeout(5)
try:
    while s.recv(65536): pass
except OSError: pass
' "$EP" $((PORT + 1)) "$REC/c2s.1"
rc0=0
wait "$p0" || rc0=$?
check "$name: rank 0 serves nobody and gives up ($rc0)" test "$rc0" != 0
has "$name: rank 0 says who did not prove the secret" "$(cat "$TEST_TMP/r0.err")" \
    "did not prove the job's secret from ${PX//./\\.}"

name="rank 0's bytes replayed to a new rank"
proxy --replay "$REC/s2c.1"
rc1=0
rank 1 n1 "$PX" "$PP" || rc1=$?
proxy_stop
check "$name: refused ($rc1)" test "$rc1" != 0
has "$name: it names the endpoint that did not prove the secret" "$(cat "$TEST_TMP/r1.err")" \
    "endpoint ${PX//./\\.}:$((PP + 1)) did not prove the job's secret"

name="a rank with another secret"
rank 0 n0 "$EP" "$PORT" &
p0=$!
rank0_listens
rc1=0
AMLDIST_JOB_TOKEN=another-$SECRET rank 1 n1 "$EP" "$PORT" || rc1=$?
rc0=0
wait "$p0" || rc0=$?
check "$name: both fail ($rc0, $rc1)" test "$rc0" != 0 -a "$rc1" != 0
has "$name: it says why" "$(cat "$TEST_TMP/r1.err")" "did not prove the job's secret"

expect_eq "no process left on any node" "$(leftovers)" ""
