#!/usr/bin/env bash
# The etcd rendezvous (issue 40) against a real etcd of one member
# (tests/etcd.sh): amlruns on loopback, the same line each, --rdzv-backend
# etcd --rdzv-endpoint HOST:PORT.  Two nodes form and run to exit 0; a
# worker's failure ends both with its status; --max-restarts runs the job
# again; --nnodes MIN:MAX forms with MIN after the last call; an amlrun
# SIGKILLed is lost (its lease expires) and the other ends; the decider's
# amlrun SIGKILLed, another takes over and the two left re-form; with
# the job's secret every value is sealed, and an amlrun of another secret
# is refused at once, saying so; two run ids beside each other on one
# etcd; etcd's user auth (the password from a file; a wrong one refused
# at once); etcd's TLS with client certificates; and nothing left in etcd
# after each job.  Short leases (2 s)
# by --rdzv-conf.
# amldist-test: slow (its cases wait out leases of 2 s)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/etcd.sh"
etcd_up 1
OUT=$TEST_TMP/out
mkdir -p "$OUT"
CONF="keep_alive_interval=0.5,keep_alive_max_attempt=4,last_call_timeout=0.5,join_timeout=30"
# The worker: one line of what it got; FAIL_RANK fails (status 3) in the
# first attempt; SLEEP0 seconds of work in the first (but in a world of
# FAST_WORLD), SLEEP in the others.
WORKER='echo "rank=$RANK world=$WORLD_SIZE restart=$TORCHELASTIC_RESTART_COUNT master=$MASTER_ADDR:$MASTER_PORT" >"$OUT/rep.$RANK.$TORCHELASTIC_RESTART_COUNT.$$"
[ "${FAIL_RANK:-x}" = "$RANK" ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && exit 3
[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ "$WORLD_SIZE" != "${FAST_WORLD:-0}" ] && exec sleep "${SLEEP0:-0}"
exec sleep "${SLEEP:-0}"'
export OUT

reset() {
    rm -f "$OUT"/*
}
left() {
    local l
    l=$(etcd_left)
    expect_eq "$1: nothing left in etcd" "$l" ""
}
# Two nodes form and run.
reset
start a form --nnodes 2
start b form --nnodes 2
waitall a b
expect_eq "2 nodes: both exit 0" "$RCS" "0 0"
got=$(reports | sed 's/ master=.*//')
expect_eq "2 nodes: ranks 0 and 1 of 2, once" "$got" "rank=0 world=2 restart=0
rank=1 world=2 restart=0"
expect_eq "2 nodes: one MASTER_ADDR:PORT" "$(reports | sed 's/.*master=//' | sort -u | wc -l)" 1
[ "$RCS" = "0 0" ] || dump
left "2 nodes"

# A worker fails: both agents end with its status, no restart.
reset
export FAIL_RANK=1 SLEEP0=20
start a fail --nnodes 2
start b fail --nnodes 2
waitall a b
expect_eq "a failure: both exit 3" "$RCS" "3 3"
check "a failure: the other node's worker was stopped, not run out" \
    grep -q "rank 1" "$OUT/a.log" "$OUT/b.log"
left "a failure"

# --max-restarts 1: the job again, which then runs out.
reset
export FAIL_RANK=0 SLEEP0=0
start a restart --nnodes 2 --max-restarts 1
start b restart --nnodes 2 --max-restarts 1
waitall a b
expect_eq "a restart: both exit 0" "$RCS" "0 0"
# (rank 1's first run may be stopped before it wrote its line)
expect_eq "a restart: rank 0 failed, then both ran again" \
    "$(reports | sed 's/ master=.*//' | sort -u | grep -v 'rank=1 world=2 restart=0')" \
    "rank=0 world=2 restart=0
rank=0 world=2 restart=1
rank=1 world=2 restart=1"
left "a restart"
unset FAIL_RANK

# --nnodes 2:3 with two: the round forms after the last call.
reset
start a elastic --nnodes 2:3
start b elastic --nnodes 2:3
waitall a b
expect_eq "elastic 2:3: both exit 0" "$RCS" "0 0"
expect_eq "elastic 2:3: a world of 2" "$(reports | sed 's/ master=.*//' | sed 's/rank=. //' | sort -u)" \
    "world=2 restart=0"
left "elastic 2:3"

# An amlrun SIGKILLed: its lease expires, the other is told it is lost.
reset
export SLEEP0=30
start a lost --nnodes 2
start b lost --nnodes 2
wait_files "$OUT" 'rep\.' 2 10
# amlrun itself, not the timeout(1) above it
kill -KILL "$(ps -o pid= --ppid "${PID[b]}")"
waitall a b
check "a lost node: the other ends, not 0" test "${RCS% *}" != 0
check "a lost node: it says the node was lost" grep -q "lost" "$OUT/a.log"
unset SLEEP0
nap 3 # the killed agent's lease (2 s) and the prefix's cleanup
left "a lost node"

# wait_reports N: until N workers wrote their line.
wait_reports() { wait_files "$OUT" 'rep\.' "$1"; }

# The decider's amlrun SIGKILLed (the first to come holds the decider
# key): its lease expires, another agent wins the key, rebuilds the
# decider from its log, and the node lost ends the round: the two left
# run it again (--max-restarts 1, --nnodes 2:3) and end 0.
reset
export SLEEP0=30 FAST_WORLD=2
start a takeover --nnodes 2:3 --max-restarts 1
for _ in $(seq 100); do
    etcd_left | grep -q '/b/lead$' && break
    nap 0.1
done
start b takeover --nnodes 2:3 --max-restarts 1
start c takeover --nnodes 2:3 --max-restarts 1
wait_reports 3 || fail "the decider's agent killed: 3 workers started"
kill -KILL "$(ps -o pid= --ppid "${PID[a]}")"
waitall a b c
expect_eq "the decider's agent killed: the others exit 0" "${RCS#* }" "0 0"
expect_eq "the decider's agent killed: they ran again, a world of 2" \
    "$(reports | grep world=2 | sed 's/ master=.*//')" "rank=0 world=2 restart=0
rank=1 world=2 restart=0"
[ "${RCS#* }" = "0 0" ] || dump
unset SLEEP0 FAST_WORLD
nap 3
left "the decider's agent killed"

# The job's secret: every value sealed (no address of the job's in the
# clear, as there is without the secret); an amlrun of another secret is
# refused at once, saying why; the job goes on.
sealed_case() {
    local want=$1 name=$2
    reset
    export SLEEP0=3
    start a "sealed" --nnodes 2
    start b "sealed" --nnodes 2
    wait_reports 2 || fail "$name: 2 workers started"
    if etcd_ctl get --prefix /amldist | grep -aq 127.0.0.1; then seen=1; else seen=0; fi
    expect_eq "$name: an address of the job's in etcd's values" "$seen" "$want"
}
sealed_case 1 "no secret"
waitall a b
expect_eq "no secret: both exit 0" "$RCS" "0 0"
export AMLDIST_JOB_TOKEN
AMLDIST_JOB_TOKEN=$(job_secret etcd)
sealed_case 0 "a secret"
AMLDIST_JOB_TOKEN=$(job_secret other) start s "sealed" --nnodes 2
waitall s
expect_eq "another secret: refused (exit 2)" "$RCS" 2
check "another secret: it says so" grep -q "sealed with another secret" "$OUT/s.log"
waitall a b
expect_eq "a secret: the job goes on, both exit 0" "$RCS" "0 0"
unset SLEEP0 AMLDIST_JOB_TOKEN
nap 0.5
left "a secret"

# Two run ids on one etcd, beside each other.
reset
export SLEEP0=1
start a x --nnodes 2
start b y --nnodes 2
start c x --nnodes 2
start d y --nnodes 2
waitall a b c d
expect_eq "two run ids: every agent exits 0" "$RCS" "0 0 0 0"
expect_eq "two run ids: two worlds of 2" "$(reports | sed 's/ master=.*//' | sort | uniq -c | awk '{print $1}' | tr '\n' ' ')" "2 2 "
unset SLEEP0
left "two run ids"

# etcd's own user auth: the password from a file (never the command
# line); a wrong one refused at once (exit 2), saying so.  Last: the
# store has auth on from here.
reset
etcd_ctl user add root:rootpw >/dev/null 2>&1
etcd_ctl user add amlrun:"$(job_secret pw)" >/dev/null 2>&1
etcd_ctl role add job >/dev/null 2>&1
etcd_ctl role grant-permission job --prefix=true readwrite /amldist/ >/dev/null 2>&1
etcd_ctl user grant-role amlrun job >/dev/null 2>&1
pw=$(job_secret pw2)
etcd_ctl user passwd amlrun --interactive=false <<<"$pw" >/dev/null 2>&1
printf '%s\n' "$pw" >"$TEST_TMP/pw"
chmod 600 "$TEST_TMP/pw"
if etcd_ctl auth enable >/dev/null 2>&1; then
    PLAIN=$CONF
    CONF="$PLAIN,username=amlrun,password_file=$TEST_TMP/pw"
    start a auth --nnodes 2
    start b auth --nnodes 2
    waitall a b
    expect_eq "etcd user auth: both exit 0" "$RCS" "0 0"
    printf 'wrong\n' >"$TEST_TMP/pw"
    start s auth --nnodes 2
    waitall s
    expect_eq "etcd user auth: a wrong password refused (exit 2)" "$RCS" 2
    check "etcd user auth: it says so" grep -q "refused user amlrun: authentication failed" "$OUT/s.log"
    expect_eq "etcd user auth: nothing left in etcd" \
        "$(etcd_ctl --user "root:rootpw" get /amldist --prefix --keys-only)" ""
    CONF=$PLAIN
else
    skip "etcd user auth" "etcdctl auth enable failed"
fi

# etcd's TLS: a member of its own that wants client certificates
# (--client-cert-auth), its CA and this node's certificate and key by
# --rdzv-conf protocol=https,cacert=,cert=,key=; without this node's
# certificate, refused.
if have openssl; then
    d=$TEST_TMP/tls
    mkdir -p "$d"
    printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' >"$d/ext"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$d/ca.key" \
        -out "$d/ca.crt" -days 1 -subj /CN=amldist-test-ca 2>/dev/null
    for n in server client; do
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$d/$n.key" \
            -out "$d/$n.csr" -subj "/CN=$n" 2>/dev/null
        openssl x509 -req -in "$d/$n.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
            -out "$d/$n.crt" -days 1 -extfile "$d/ext" 2>/dev/null
    done
    cp=$(etcd_free_port) pp=$(etcd_free_port)
    etcd --name tls --data-dir "$d/data" --listen-client-urls "https://127.0.0.1:$cp" \
        --advertise-client-urls "https://127.0.0.1:$cp" --listen-peer-urls "http://127.0.0.1:$pp" \
        --initial-advertise-peer-urls "http://127.0.0.1:$pp" --initial-cluster "tls=http://127.0.0.1:$pp" \
        --cert-file "$d/server.crt" --key-file "$d/server.key" --trusted-ca-file "$d/ca.crt" \
        --client-cert-auth --log-level error >"$d/log" 2>&1 &
    ETCD_PIDS+=($!)
    for _ in $(seq 100); do
        ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:$cp" --cacert "$d/ca.crt" --cert "$d/client.crt" \
            --key "$d/client.key" endpoint health >/dev/null 2>&1 && break
        nap 0.1
    done
    reset
    ETCD_EP=127.0.0.1:$cp
    CONF="$CONF,protocol=https,cacert=$d/ca.crt,cert=$d/client.crt,key=$d/client.key"
    start a tls --nnodes 2
    start b tls --nnodes 2
    waitall a b
    expect_eq "etcd's TLS: both exit 0" "$RCS" "0 0"
    CONF="${CONF%,cert=*},join_timeout=2"
    start s tls --nnodes 1
    waitall s
    check "etcd's TLS: without this node's certificate, not 0" test "$RCS" != 0
else
    skip "etcd's TLS" "no openssl"
fi

echo "# done"
