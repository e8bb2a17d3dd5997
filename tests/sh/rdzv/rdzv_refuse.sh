#!/usr/bin/env bash
# Agents that do not belong to the job (issue 12): while a two-node job
# runs (c10d rendezvous at n0, AMLDIST_JOB_TOKEN and --rdzv-id given), an
# agent on n2 with another token, another --rdzv-id, another --nnodes,
# another --max-restarts, or the very same line (the job is full) is
# refused: it exits 2 with a message naming why and starts no worker, and
# the job goes on unaffected.  Agents that find no host, or too few nodes,
# within the join timeout give up (125) instead of hanging.  As
# rdzv_refuse@etcd, on etcd: there a run id is a job of its own (no
# refusal to check), no agent waits for a host, and the TCP host's port
# (a foreign server on it) is c10d's; a web server where the etcd member
# should be is etcd's.
# amldist-test: etcd
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
. "$TOP/tests/amlrun/rdzv.sh"
rz_setup 3
EP=$(node_addr n0)
TOKEN=$(job_secret "rz-token-$PORT")

# agent NODE ARGS...: an agent of the job, ARGS changing or adding options.
agent() {
    local node=$1
    shift
    rz_start "$node" --rdzv-backend c10d --rdzv-endpoint "$EP:$PORT" --rdzv-id real --nnodes 2 \
        --nproc-per-node 2 --rdzv-conf "$RZ_FAST" "$@" "$RZW"
}

rz_case refuse
export RZ_RUN=60 RZ_UNTIL=release
AMLDIST_JOB_TOKEN=$TOKEN agent n0
AMLDIST_JOB_TOKEN=$TOKEN agent n1
if ! rz_wait_files rep. 4; then
    fail "the job runs on n0 and n1"
    rz_dump
fi

# refused NAME ERE TOKEN RUN-ID NNODES [ARGS...]: an agent on n2 with
# these settings, waited for.
refused() {
    local name=$1 ere=$2 token=$3 id=$4 nn=$5 t0 err rc end
    shift 5
    t0=$(now_ms)
    rc=0
    rz_argv --rdzv-backend c10d --rdzv-endpoint "$EP:$PORT" \
        --rdzv-id "$id" --nnodes "$nn" --nproc-per-node 2 --rdzv-conf "$RZ_FAST" "$@" "$RZW"
    AMLDIST_JOB_TOKEN=$token on n2 $T "$AMLRUN" "${RZ_ARGV[@]}" \
        >"$RZ_DIR/n2.out" 2>"$RZ_DIR/n2.err" || rc=$?
    end=$(now_ms)
    err=$(cat "$RZ_DIR/n2.err")
    diag "$name: exit $rc after $((end - t0)) ms: $(head -n 2 <<<"$err" | tr '\n' ' ')"
    expect_eq "$name: refused (exit 2)" "$rc" 2
    has "$name: the message says why" "$err" "$ere"
    expect_eq "$name: no worker started on n2" "$(rz_count rep.n2.)" 0
}
# (on etcd, the decider key's value does not open: "sealed with another
# secret"; another run id is another job there, under its own keys: it
# would wait for its own nodes, refused by nobody)
refused "another AMLDIST_JOB_TOKEN" '[Tt]oken|another secret' "$(job_secret another-token)" real 2
rz_c10d_only "another --rdzv-id" "on etcd a run id is a job of its own" &&
    refused "another --rdzv-id" 'run.?id|rdzv.?id' "$TOKEN" other 2
refused "another --nnodes" 'nnodes|nodes' "$TOKEN" real 3
refused "another --max-restarts" 'restarts' "$TOKEN" real 2 --max-restarts 3
refused "a third node in a job of 2 (the same line)" 'full|has its [0-9]+ nodes' "$TOKEN" real 2

touch "$RZ_DIR/release"
rz_wait n0 n1
name="the job beside the refused agents"
rz_expect "$name: n0 and n1 exit 0" "$(rz_rcs n0 n1)" "n0=0 n1=0"
expect_eq "$name: its workers ran once, undisturbed" \
    "$(rz_count rep.) $(rz_count term.)" "4 0"
rz_check_layout "$name" 2 0
no_leftovers "refused agents"

# No host: an agent on n1 whose endpoint nobody listens on gives up at the
# join timeout with 125.  On etcd: no etcd member there (n1's own port
# 2379, where none listens).
rz_case nohost
if [ "$RZ_BACKEND" = etcd ]; then
    RZ_BACKEND=c10d rz_start n1 --rdzv-backend etcd --rdzv-endpoint "$(node_addr n1):2379" \
        --nnodes 2 --nproc-per-node 1 --rdzv-conf join_timeout=2 "$RZW"
    nohost='no etcd member answered within 2 s \(last: [^)]+\); no worker started$'
else
    rz_start n1 --rdzv-backend c10d --rdzv-endpoint "$EP:$((PORT + 10))" --nnodes 2 \
        --nproc-per-node 1 --rdzv-conf join_timeout=2 "$RZW"
    nohost='no host answered within 2 s \(last: [^)]*\); no worker started$'
fi
t0=$(now_ms)
rz_wait
rz_expect "no host within join_timeout=2: exit 125" "${RC[n1]}" 125
diag "no host: exit ${RC[n1]} after $((${END[n1]} - t0)) ms: $(tail -n 1 "$RZ_DIR/n1.err")"
has "no host within join_timeout=2: gives up at its join timeout, and says so" "$(cat "$RZ_DIR/n1.err")" \
    "$nohost"
expect_eq "no host: no worker started" "$(rz_count rep.)" 0
no_leftovers "no host"

# Too few nodes: the host's agent alone in a job of 2.
rz_case alone
rz_start n0 --rdzv-backend c10d --rdzv-endpoint "$EP:$((PORT + 20))" --nnodes 2 \
    --nproc-per-node 1 --rdzv-conf join_timeout=2 "$RZW"
t0=$(now_ms)
rz_wait
diag "host alone in a job of 2: exit ${RC[n0]} after $((${END[n0]} - t0)) ms: $(head -n 2 "$RZ_DIR/n0.err" | tr '\n' ' ')"
check "host alone in a job of 2, join_timeout=2: gives up (${RC[n0]}), not at the test's timeout" \
    test "${RC[n0]}" != 0 -a "${RC[n0]}" != 124
has "host alone in a job of 2: at its join timeout, and says so" "$(cat "$RZ_DIR/n0.err")" \
    'only 1 of the 2 nodes needed joined within 2 s; no worker started$'
expect_eq "host alone: no worker started" "$(rz_count rep.)" 0
no_leftovers "host alone"

# A stop signal while waiting for the round: the agent gives up at once,
# not at its join timeout, which is beyond the test's timeout (T): an agent
# that waited would end by that timeout, 124, not by the signal, 143.
waiting_stop() {
    local name=$1 node=$2 port=$3 pid t0
    rz_case "wait-$node"
    rsts=$(rz_rsts n0)
    rz_start "$node" --rdzv-backend c10d --rdzv-endpoint "$EP:$port" --nnodes 2 \
        --nproc-per-node 1 --rdzv-conf join_timeout=3600 "$RZW"
    # (the host's agent listens; the other waits once n0 has refused it;
    # on etcd, once it has joined)
    if [ "$RZ_BACKEND" = etcd ]; then rz_wait_joined 1
    elif [ "$node" = n0 ]; then rz_wait_listen n0 "$port"; else rz_wait_refused n0 "$rsts"; fi
    if ! pid=$(rz_agent_pid "$node"); then
        fail "$name: the agent waits"
    else
        t0=$(now_ms)
        kill -TERM "$pid"
    fi
    rz_wait
    rz_expect "$name: SIGTERM, exit 143 (at once, not at join_timeout=3600)" "${RC[$node]}" 143
    diag "$name: ended $((${END[$node]} - ${t0:-0})) ms after the signal"
    no_leftovers "$name"
}
waiting_stop "the host's agent waiting for the other node" n0 $((PORT + 30))
# (on etcd an agent alone is the decider's: the case above)
rz_c10d_only "an agent waiting for the host" "on etcd, no agent waits for a host" &&
    waiting_stop "an agent waiting for the host" n1 $((PORT + 40))

# No AMLDIST_JOB_TOKEN anywhere: the token is derived (from the endpoint),
# and another --rdzv-id is refused, naming the run id.  (On etcd a run id
# is a job of its own: c10d's alone.)
if rz_c10d_only "no token given, --rdzv-id a and b" "on etcd a run id is a job of its own"; then
rz_case runid
export RZ_RUN=30 RZ_UNTIL=never
rz_start n0 --rdzv-backend c10d --rdzv-endpoint "$EP:$((PORT + 50))" --rdzv-id a --nnodes 2 \
    --nproc-per-node 1 --rdzv-conf join_timeout=3 "$RZW"
rz_wait_listen n0 $((PORT + 50))
rz_start n1 --rdzv-backend c10d --rdzv-endpoint "$EP:$((PORT + 50))" --rdzv-id b --nnodes 2 \
    --nproc-per-node 1 --rdzv-conf join_timeout=3 "$RZW"
rz_wait
name="no token given, --rdzv-id a and b"
rz_expect "$name: b is refused (2), a gives up at its join timeout (125)" "$(rz_rcs n0 n1)" "n0=125 n1=2"
has "$name: b is told why (the run id)" "$(cat "$RZ_DIR/n1.err")" 'run id|rdzv-id'
expect_eq "$name: no worker started" "$(rz_count rep.)" 0
no_leftovers "$name"
fi

# Something else listens on the endpoint: a server that never answers, or
# one that answers garbage.  The agent gives up (at the latest after the
# join timeout and a dead time), names the endpoint, starts no worker.
# (the TCP host's port: c10d's alone)
for mode in silent garbage; do
    rz_c10d_only "a $mode server on the endpoint" "the TCP host's port" || continue
    rz_case "foreign-$mode"
    P=$((PORT + 60 + ${#mode}))
    on n0 timeout 30 "$TORCH_PY" -c "
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('$EP', $P)); s.listen(8); print('ready', flush=True)
conns = []
while True:
    c, a = s.accept(); conns.append(c)
    if '$mode' == 'garbage': c.sendall(b'HTTP/1.1 400 Bad Request\r\n\r\n' + bytes(64))
" >"$RZ_DIR/server" 2>&1 &
    server=$!
    n=0
    until grep -q ready "$RZ_DIR/server" 2>/dev/null || ((n++ > 200)); do sleep 0.05; done
    rz_start n1 --rdzv-backend c10d --rdzv-endpoint "$EP:$P" --nnodes 2 --nproc-per-node 1 \
        --rdzv-conf "$RZ_FAST,join_timeout=2" "$RZW"
    t0=$(now_ms)
    rz_wait
    # (the server is all there is on n0)
    netns_kill_all "$CLUSTER-n0"
    wait "$server" 2>/dev/null
    name="a $mode server on the endpoint"
    diag "$name: exit ${RC[n1]} after $((${END[n1]} - t0)) ms: $(head -n 2 "$RZ_DIR/n1.err" | tr '\n' ' ')"
    check "$name: the agent gives up (${RC[n1]}), not at the test's timeout" \
        test "${RC[n1]}" != 0 -a "${RC[n1]}" != 124
    # (at its join timeout and a dead time at the latest, by what it saw:
    # no heartbeat, a bad frame, the handshake's end)
    has "$name: it says why it gives up" "$(cat "$RZ_DIR/n1.err")" \
        "cannot join the job's rendezvous: rendezvous at $EP:$P: .+; no worker started\$"
    has "$name: it names the endpoint" "$(cat "$RZ_DIR/n1.err")" "$EP:$P"
    expect_eq "$name: no worker started" "$(rz_count rep.)" 0
    no_leftovers "$name"
done

# On etcd: a web server where the member should be (it answers, but not
# as etcd's JSON gateway): the agent gives up at its join timeout, saying
# that something else answers there (it said "no etcd member answered
# (last: )").
if [ "$RZ_BACKEND" = etcd ]; then
    rz_case foreign-web
    P=$((PORT + 70))
    on n0 timeout 30 "$TORCH_PY" -m http.server "$P" --bind "$EP" >"$RZ_DIR/server" 2>&1 &
    server=$!
    rz_wait_listen n0 "$P" || fail "the web server listens"
    RZ_BACKEND=c10d rz_start n1 --rdzv-backend etcd --rdzv-endpoint "$EP:$P" --nnodes 2 \
        --nproc-per-node 1 --rdzv-conf "$RZ_FAST,join_timeout=2" "$RZW"
    rz_wait
    netns_kill_all "$CLUSTER-n0"
    wait "$server" 2>/dev/null
    name="a web server on the etcd endpoint"
    diag "$name: exit ${RC[n1]}: $(tail -n 1 "$RZ_DIR/n1.err")"
    rz_expect "$name: the agent gives up at its join timeout (125)" "${RC[n1]}" 125
    has "$name: it says something else answers there" "$(cat "$RZ_DIR/n1.err")" \
        "${EP//./\\.}:$P answered in another protocol \\(HTTP status [0-9]+, not etcd's JSON gateway\\)"
    expect_eq "$name: no worker started" "$(rz_count rep.)" 0
    no_leftovers "$name"
fi
