#!/usr/bin/env bash
# amlrun --status whatever the user's other jobs do (issue 38): a job asked
# during its rendezvous (a 2-node static job whose second node never
# starts); a SIGSTOPped amlrun beside a running one (the running one
# answers, the stopped one is named); 20 idle connections held open to a
# job's socket; a symbolic link another user planted in their socket
# directory for root's --status PID; /tmp/amlrun-<uid> squatted by another
# user before the victim's job starts (its fallback directory removed by
# the job that ends last in it); a request on its way while the rendezvous's
# thread hands the socket to the supervisor.  No timed assertion: each --status
# runs under a generous outer timeout and must name what it must.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
d=$TEST_TMP/sw
mkdir -p "$d"
export XDG_RUNTIME_DIR=$TEST_TMP/xdg
mkdir -m 0700 "$XDG_RUNTIME_DIR"
sockdir=$XDG_RUNTIME_DIR/amlrun

# wait_sock RUNID: the pid of the amlrun whose socket for RUNID appears
wait_sock() {
    local p= deadline=$((SECONDS + 60))
    until [ -n "$p" ] || [ "$SECONDS" -ge "$deadline" ]; do
        p=$(ls "$sockdir" 2>/dev/null | sed -n "s/^$1\.\([0-9]*\)\.sock\$/\1/p" | head -n 1)
        [ -n "$p" ] || sleep 0.1
    done
    echo "$p"
}

# --- in its rendezvous: node 1 never starts
port=$(free_port)
"$AMLRUN" --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --master-port "$port" \
    --nproc-per-node 1 --run-id sw-rz sleep 60 >"$d/rz.out" 2>"$d/rz.err" &
rz=$!
rzpid=$(wait_sock sw-rz)
expect_eq "the socket exists during the rendezvous, under amlrun's pid" "$rzpid" "$rz"
timeout 30 "$AMLRUN" --status >"$d/rz1.out" 2>&1
expect_eq "--status during the rendezvous answers (0)" "$?" 0
check "it says the job is in its rendezvous" grep -q "^job sw-rz: amlrun pid $rz, in its rendezvous" "$d/rz1.out"
check "and what it waits for: 2 nodes at its endpoint" grep -q "^waiting for: the rendezvous at 127.0.0.1:[0-9]* (static): 2 nodes" "$d/rz1.out"
timeout 30 "$AMLRUN" --status=json sw-rz >"$d/rz.json" 2>&1
check "--status=json: phase rendezvous, no ranks" "$TORCH_PY" -c "
import json; j = json.load(open('$d/rz.json'))
assert j['phase'] == 'rendezvous' and j['ranks'] == [] and j['nodes_in_job'] == 2, j"
timeout 30 "$AMLRUN" --stacks sw-rz >/dev/null 2>"$d/rzk.err"
expect_eq "--stacks during the rendezvous: exit 1" "$?" 1
check "saying no worker runs yet" grep -q "in its rendezvous: no worker runs yet" "$d/rzk.err"

# --- a stopped amlrun beside the one in its rendezvous
mkdir -p "$d/run"
"$AMLRUN" --nproc-per-node 1 --run-id sw-stop sh -c 'touch "$0/up"; exec sleep 60' "$d/run" \
    >/dev/null 2>"$d/stop.err" &
stopped=$!
wait_for 1 60 "$d/run" up >/dev/null
kill -STOP "$stopped"
timeout 30 "$AMLRUN" --status >"$d/st.out" 2>"$d/st.err"
expect_eq "beside a stopped amlrun: --status answers for the other job (0)" "$?" 0
check "with that job's status" grep -q "^job sw-rz: amlrun pid $rz" "$d/st.out"
check "and names the stopped one in one line" \
    grep -q "^amlrun: job sw-stop (amlrun pid $stopped) did not answer: it is stopped" "$d/st.err"
timeout 30 "$AMLRUN" --status "$stopped" >/dev/null 2>"$d/st2.err"
expect_eq "--status of the stopped one: exit 1" "$?" 1
check "it is named as stopped" grep -q "pid $stopped) did not answer: it is stopped" "$d/st2.err"
kill -CONT "$stopped"
kill -TERM "$stopped"; wait "$stopped" 2>/dev/null
kill -TERM "$rz"; wait "$rz" 2>/dev/null

# --- 20 idle connections to a running job's socket
mkdir -p "$d/idle"
"$AMLRUN" --nproc-per-node 1 --run-id sw-idle sh -c 'touch "$0/up"; exec sleep 120' "$d/idle" \
    >/dev/null 2>"$d/idle.err" &
idle=$!
wait_for 1 60 "$d/idle" up >/dev/null
"$TORCH_PY" -c '
import socket, sys, time
held = []
for _ in range(20):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); held.append(s)
open(sys.argv[2], "w").close()
time.sleep(90)' "$sockdir/sw-idle.$idle.sock" "$d/held" &
holder=$!
wait_for 1 30 "$d" held >/dev/null
timeout 30 "$AMLRUN" --status sw-idle >"$d/idle.out" 2>&1
expect_eq "20 idle connections held: --status still answers (0)" "$?" 0
check "with the job's rank" grep -q "^job sw-idle: amlrun pid $idle, 1 rank on 1 node" "$d/idle.out"
kill "$holder"; wait "$holder" 2>/dev/null

# --- another user: a link planted for root's --status PID, and
# /tmp/amlrun-<uid> squatted before the victim's job starts
quser=amlrun-swtest
made_user=
if ! id "$quser" >/dev/null 2>&1 && have useradd; then
    useradd -M -r -s /usr/sbin/nologin "$quser" 2>/dev/null && made_user=1
fi
if id "$quser" >/dev/null 2>&1 && have runuser; then
    quid=$(id -u "$quser")
    # (outside TEST_TMP, which only root may enter)
    udir=$(mktemp -d /tmp/amlrun-swtest-xdg.XXXXXX); chown "$quid" "$udir"
    (cd / && exec runuser -u "$quser" -- env XDG_RUNTIME_DIR="$udir" "$AMLRUN" --nproc-per-node 1 \
        --run-id sw-u sh -c 'exec sleep 120') >/dev/null 2>&1 &
    ujob=$!
    upid=
    deadline=$((SECONDS + 60))
    until [ -n "$upid" ] || [ "$SECONDS" -ge "$deadline" ]; do
        upid=$(ls "$udir/amlrun" 2>/dev/null | sed -n 's/^sw-u\.\([0-9]*\)\.sock$/\1/p')
        sleep 0.1
    done
    if [ -n "$upid" ]; then
        # The user plants a link to root's own socket (sw-idle's) under a
        # name with its pid: root's --status PID must not follow it.
        runuser -u "$quser" -- ln -s "$sockdir/sw-idle.$idle.sock" "$udir/amlrun/evil.$upid.sock"
        mv "$udir/amlrun/sw-u.$upid.sock" "$d/u.sock.away" 2>/dev/null
        timeout 30 "$AMLRUN" --status "$upid" >"$d/link.out" 2>&1
        expect_eq "root's --status PID with only a planted link there: no such job (1)" "$?" 1
        check "it does not follow the link (no status of the job it points to)" \
            sh -c "! grep -q '^job ' '$d/link.out'"
        mv "$d/u.sock.away" "$udir/amlrun/sw-u.$upid.sock"
        rm -f "$udir/amlrun/evil.$upid.sock"
        timeout 30 "$AMLRUN" --status "$upid" >"$d/u.out" 2>&1
        expect_eq "root's --status PID of the user's real job answers (0)" "$?" 0
        check "naming that job" grep -q "^job sw-u: amlrun pid $upid" "$d/u.out"
    else
        fail "the user's job did not start"
    fi
    kill -TERM "$upid" 2>/dev/null; wait "$ujob" 2>/dev/null
    # The squat: the user makes /tmp/amlrun-<uid> of another uid first.
    victim=$quid
    squat=/tmp/amlrun-$victim
    rm -rf "$squat"
    mkdir -m 0755 "$squat"   # root's, open: the victim may not trust it
    (cd / && exec runuser -u "$quser" -- env -u XDG_RUNTIME_DIR "$AMLRUN" --nproc-per-node 1 \
        --run-id sw-v sh -c 'exec sleep 120') >/dev/null 2>"$d/v.err" &
    vjob=$!
    deadline=$((SECONDS + 60)); vok=
    until [ -n "$vok" ] || [ "$SECONDS" -ge "$deadline" ]; do
        vok=$(ls -d "/tmp/amlrun-$victim".* 2>/dev/null | head -n 1)
        sleep 0.1
    done
    check "the victim's job made its socket in a /tmp/amlrun-<uid>.XXXXXX of its own" test -n "$vok"
    check "and said once why, naming the squatted directory and its owner" \
        sh -c "grep -c 'warning: $squat belongs to uid 0, not to uid $victim' '$d/v.err' | grep -qx 1"
    out=$(cd / && timeout 30 runuser -u "$quser" -- env -u XDG_RUNTIME_DIR "$AMLRUN" --status 2>&1)
    expect_eq "the victim's --status still finds its job (0)" "$?" 0
    check "naming it" grep -q "^job sw-v: amlrun pid" <<<"$out"
    # A second job of the victim's takes the same fallback; the
    # directory goes with the job that ends last in it (issue 38), not
    # before: the first to end leaves the other's socket there.
    (cd / && exec runuser -u "$quser" -- env -u XDG_RUNTIME_DIR "$AMLRUN" --nproc-per-node 1 \
        --run-id sw-w sh -c 'exec sleep 120') >/dev/null 2>&1 &
    wjob=$!
    deadline=$((SECONDS + 60)); wpid=
    until [ -n "$wpid" ] || [ "$SECONDS" -ge "$deadline" ]; do
        wpid=$(ls "$vok" 2>/dev/null | sed -n 's/^sw-w\.\([0-9]*\)\.sock$/\1/p')
        sleep 0.1
    done
    check "a second job of the victim's takes the same fallback directory" test -n "$wpid"
    kill -TERM $(ls "$vok" | sed -n 's/^sw-v\.\([0-9]*\)\.sock$/\1/p') 2>/dev/null
    wait "$vjob" 2>/dev/null
    check "the first job's end leaves the fallback, which holds the second's socket" \
        test -S "$vok/sw-w.$wpid.sock"
    out=$(cd / && timeout 30 runuser -u "$quser" -- env -u XDG_RUNTIME_DIR "$AMLRUN" --status 2>&1)
    check "the second job still answers --status" grep -q "^job sw-w: amlrun pid $wpid" <<<"$out"
    kill -TERM "$wpid" 2>/dev/null
    wait "$wjob" 2>/dev/null
    expect_eq "the last job's end removes the fallback directory (mkdtemp'd, now empty)" \
        "$(ls -d "/tmp/amlrun-$victim".* 2>/dev/null)" ""
    rm -rf "$squat" "/tmp/amlrun-$victim".* "$udir"
    [ -n "$made_user" ] && userdel "$quser" 2>/dev/null
else
    skip "another user's link and squat" "no user $quser and no useradd/runuser"
fi
# --- a request on its way at the handover from the rendezvous's thread to
# the supervisor: a client connected during the rendezvous, which sends
# its request once the job runs (or 1.8 s after its connect, inside the 2
# s a connection has for its request), is answered, never closed
# unanswered (which reads as a socket that is not the job's).
port=$(free_port)
mkdir -p "$d/hand"
"$AMLRUN" --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --master-port "$port" \
    --nproc-per-node 1 --run-id sw-hand sh -c 'touch "$0/up"; exec sleep 5' "$d/hand" \
    >/dev/null 2>"$d/hand.err" &
hand=$!
handpid=$(wait_sock sw-hand)
"$TORCH_PY" - "$sockdir/sw-hand.$handpid.sock" "$d/hand/up" >"$d/hand.client" 2>&1 <<'PY' &
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
print("connected", flush=True)
t0 = time.monotonic()
while not os.path.exists(sys.argv[2]) and time.monotonic() - t0 < 1.8:
    time.sleep(0.005)
s.sendall(b"status\n")
got = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    got += b
print(got.split(b"\n", 1)[0].decode() if got else "closed without an answer", flush=True)
PY
client=$!
until grep -q connected "$d/hand.client" 2>/dev/null || ! kill -0 "$client" 2>/dev/null; do sleep 0.01; done
"$AMLRUN" --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port "$port" \
    --nproc-per-node 1 --run-id sw-hand true >/dev/null 2>"$d/hand1.err"
wait "$client"
check "a request sent across the handover is answered" \
    grep -q '^amlrun-answer 1 status$' "$d/hand.client" || diag "$(cat "$d/hand.client")"
wait "$hand" 2>/dev/null

kill -TERM "$idle"; wait "$idle" 2>/dev/null
exit 0
