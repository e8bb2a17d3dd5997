#!/usr/bin/env bash
# The control plane's channel (issue 21), real traffic through a recording
# and tampering proxy (tests/amlrun/chanproxy.py) on n2: a two-node c10d
# job with a secret, n0 hosting at n0:PORT, n1 reaching it through the
# proxy.  What crosses the wire holds neither the secret nor the job's
# addresses; a flipped bit either way, frames reordered, a frame cut short,
# a recorded FINISH injected: the side that reads it drops the connection
# with an integrity error that names its peer, the host treats the node as
# lost, nobody acts on the frame.  An agent's recorded bytes replayed into
# the same job or a later one with the same secret, the host's replayed to
# a new agent, a wrong secret: refused, no worker started for them.
# No etcd variant (tests/amlrun/rdzv.sh's RZ_BACKEND): the channel through
# the proxy is the TCP backend's transport; etcd's values are sealed
# instead (etcd_one), and issue 20's plane is not on etcd yet.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
. "$TOP/tests/amlrun/rdzv.sh"
rz_setup 3
EP=$(node_addr n0)
PX=$(node_addr n2)
PROXY=$TOP/tests/amlrun/chanproxy.py
SECRET=$(job_secret "chan-secret-$PORT")
export AMLDIST_JOB_TOKEN=$SECRET
PP=$((PORT + 100)) # the proxy's port
REC=$TEST_TMP/rec  # the clean run's recording, for the replays
mkdir -p "$REC"

# proxy ARGS...: the proxy on n2, PX:PP to EP:PORT, until proxy_stop.
proxy() {
    on n2 timeout 120 "$TORCH_PY" "$PROXY" "$PX" "$PP" "$EP" "$PORT" "$@" \
        >"$RZ_DIR/proxy.out" 2>"$RZ_DIR/proxy.log" &
    rz_wait_listen n2 "$PP" || fail "the proxy listens"
}
proxy_stop() { netns_kill_all "$CLUSTER-n2"; wait 2>/dev/null; }

# agent NODE ENDPOINT ARGS...: an agent of the job.
agent() {
    local node=$1 ep=$2
    shift 2
    rz_start "$node" --rdzv-backend c10d --rdzv-endpoint "$ep" --rdzv-id chan \
        --nproc-per-node 1 --rdzv-conf "$RZ_FAST${JT:+,join_timeout=$JT}${LC:+,last_call_timeout=$LC}" "$@" "$RZW"
}

# A clean run through the proxy, recorded.
rz_case clean
export RZ_RUN=3
agent n0 "$EP:$PORT" --nnodes 2
agent n1 "$PX:$PP" --nnodes 2
proxy --record "$REC"
rz_wait n0 n1
proxy_stop
name="through the proxy, untouched"
rz_expect "$name: both nodes exit 0" "$(rz_rcs n0 n1)" "n0=0 n1=0"
rz_check_layout "$name" 2 0
check "$name: the recording has both directions" test -s "$REC/c2s.1" -a -s "$REC/s2c.1"
check "$name: the secret never crosses the wire" \
    sh -c '! grep -qaF "$0" "$1"/*' "$SECRET" "$REC"
# (a hostname as a word of text or a NUL-padded field: a space, a NUL, a line
# end or punctuation either side.  "n[01]\b" alone, 2.3e-5 a byte position,
# matched the random ciphertext of the few KiB recorded in a few runs of 100)
check "$name: nor MASTER_ADDR ($EP) or the hostnames (the frames are encrypted)" \
    sh -c '! LC_ALL=C grep -qaP "10\.231\.0\.1[0-9]|(^|[\x00 (=:,])n[01]([\x00 ):,]|\$)" "$0"/s2c.1 "$0"/c2s.1' "$REC"
no_leftovers "$name"

# tampered NAME WHO PROXY-ARGS...: the proxy does what PROXY-ARGS say; the
# node that reads it (WHO) says "integrity error" naming its peer; both end,
# not 0.
tampered() {
    local name=$1 side=$2 peer
    shift 2
    rz_case "t-$1-$2"
    export RZ_RUN=60 RZ_UNTIL=never
    agent n0 "$EP:$PORT" --nnodes 2 --max-restarts 0
    agent n1 "$PX:$PP" --nnodes 2 --max-restarts 0
    proxy "$@" --armed "$RZ_DIR/rep.*:2"
    rz_wait n0 n1
    proxy_stop
    diag "$name: $(cat "$RZ_DIR/proxy.log" | tr '\n' ' ')"
    check "$name: the proxy did it" grep -q . "$RZ_DIR/proxy.log"
    check "$name: both nodes end, not 0, before the test's deadline ($(rz_rcs n0 n1))" \
        test "${RC[n0]}" != 0 -a "${RC[n1]}" != 0 -a "${RC[n0]}" != 124 -a "${RC[n1]}" != 124
    peer="$PX"
    [ "$side" = n1 ] && peer="$PX:$PP"
    has "$name: $side names the integrity error and its peer ($peer)" \
        "$(cat "$RZ_DIR/$side.err")" "(${peer//./\\.}).*integrity error|integrity error.*(${peer//./\\.})"
    if [ "$side" = n0 ]; then
        has "$name: the host treats node 1 as lost" "$(cat "$RZ_DIR/n0.err")" "node 1 \\($PX\\) was lost"
    fi
    expect_eq "$name: the workers started once" "$(rz_count rep.)" 2
    no_leftovers "$name"
}
# The frames tampered with (tampered) are counted from the first one after both
# workers have their records (--armed): by then the round has formed, and
# heartbeats cross every 0.5 s both ways.  Counted from the connection's
# start, the TIMEQ/TIMEA the heartbeats add made the Nth frame now one of
# the round's forming (no worker started), now a later one.
tampered "a bit flipped, agent to host" n0 --flip c2s:0
tampered "a bit flipped, host to agent" n1 --flip s2c:0
tampered "frames reordered, host to agent" n1 --reorder s2c:0
tampered "a frame cut short, agent to host" n0 --truncate c2s:0
tampered "a recorded FINISH injected, host to agent" n1 --inject "s2c:0:$REC/s2c.1"

# replay NAME FILE PORT: FILE's bytes to n0:PORT from n2, what came back
# in $RZ_DIR/answer.
replay() {
    on n2 timeout 20 "$TORCH_PY" -c '
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
s.sendall(open(sys.argv[3], "rb").read())
s.settimeout(10)
out = b""
try:
    while True:
        d = s.recv(65536)
        if not d: break
        out += d
except OSError: pass
open(sys.argv[4], "wb").write(out)
' "$EP" "$2" "$3" "$RZ_DIR/answer"
    diag "$1: the host answered $(wc -c <"$RZ_DIR/answer") bytes and closed"
}

# An agent's recording replayed into the same (elastic) job while it runs:
# refused; the job is not disturbed (no re-formed round for a third node).
rz_case replay-same
export RZ_RUN=60 RZ_UNTIL=release
LC=1 agent n0 "$EP:$PORT" --nnodes 2:3
LC=1 agent n1 "$EP:$PORT" --nnodes 2:3
rz_wait_files rep. 2 || fail "the elastic job runs"
replay "n1's recording into the same job" "$PORT" "$REC/c2s.1"
sleep 2 # a third node would re-form the round within the last call
touch "$RZ_DIR/release"
rz_wait n0 n1
name="an agent's bytes replayed into the same job"
rz_expect "$name: the job ends well" "$(rz_rcs n0 n1)" "n0=0 n1=0"
expect_eq "$name: its workers ran once, undisturbed" "$(rz_count rep.) $(rz_count term.)" "2 0"
no_leftovers "$name"

# ... into a later job with the same secret: its host alone starts nothing.
rz_case replay-later
unset RZ_UNTIL
JT=6 agent n0 "$EP:$PORT" --nnodes 2
rz_wait_listen n0 "$PORT"
replay "n1's recording into a later job" "$PORT" "$REC/c2s.1"
rz_wait n0
name="an agent's bytes replayed into a later job"
rz_expect "$name: its host gives up at the join timeout (125)" "${RC[n0]}" 125
expect_eq "$name: no worker started" "$(rz_count rep.)" 0
no_leftovers "$name"

# The host's recording replayed to a new agent: it is refused at once, says
# the endpoint did not prove the job's secret, starts nothing.
rz_case replay-host
agent n1 "$PX:$PP" --nnodes 2
proxy --replay "$REC/s2c.1"
rz_wait n1
proxy_stop
name="the host's bytes replayed to a new agent"
rz_expect "$name: refused (2)" "${RC[n1]}" 2
has "$name: it names the endpoint that did not prove the secret" \
    "$(cat "$RZ_DIR/n1.err")" "endpoint ${PX//./\\.}:$PP did not prove the job's secret"
expect_eq "$name: no worker started" "$(rz_count rep.)" 0
no_leftovers "$name"

# A node with another secret: refused with a clear line.
rz_case wrong
export RZ_RUN=30 RZ_UNTIL=never
JT=6 agent n0 "$EP:$PORT" --nnodes 2
rz_wait_listen n0 "$PORT"
AMLDIST_JOB_TOKEN=another-$SECRET agent n1 "$EP:$PORT" --nnodes 2
rz_wait n0 n1
name="a node with another secret"
rz_expect "$name: it is refused (2), the host gives up (125)" "$(rz_rcs n0 n1)" "n0=125 n1=2"
has "$name: it says why" "$(cat "$RZ_DIR/n1.err")" "did not prove the job's secret"
expect_eq "$name: no worker started" "$(rz_count rep.)" 0
no_leftovers "$name"
