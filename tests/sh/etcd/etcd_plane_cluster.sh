#!/usr/bin/env bash
# Issue 20's plane on the etcd rendezvous across real network namespaces
# (etcd_plane.sh: the same on loopback), where the address the decider
# publishes as P/b/plane must be one the other nodes reach.  An etcd of
# three members, one in each of n0, n1 and n2 (tests/etcd.sh's
# etcd_up_nodes); an amlrun on each node, --rdzv-backend etcd; n1's agent
# decides (it comes first).  The hang and healthy jobs give every node the
# same line (the members' list); the --status job, which has a secret,
# gives each node one member: n1 (the decider) its own, n0 n1's, n2 n0's
# (nodes whose etcd member is on another node).  n1 is given a second
# address (an interface of a network nobody else has) beside its cluster
# one:
#   - the address published is n1's cluster address, the one etcd saw it
#     at (not loopback, not the second one);
#   - --hang-timeout across nodes: n2's rank stops in a Python function
#     while the others wait for it in an all_reduce (tests/amlrun/ring.py
#     through ddp_hang.py, no PyTorch); the report is printed on the
#     decider's node n1 alone, naming that rank with host n2, its pid and
#     ddp_hang.py:LINE; every node exits 124.  Beside it a healthy job of
#     the same timeout (a shell loop that prints) ends 0, no "hang:" said;
#   - amlrun --status and --stacks asked on n0 and n2 (not the decider's
#     node), with the job's secret (the plane's connections behind the
#     channel): every rank of the 3 nodes, on its host, with a pid;
#   - n1's amlrun SIGKILLed: another agent takes over and publishes its
#     own plane, n0 and n2 re-form (a world of 2), and --status on n0
#     shows both nodes' ranks again, through the new decider.
# Cheap (about 4 s of CPU): leases of 2 s, shell and ring.py workers.
# amldist-test: slow (its cases wait out leases and a hang timeout)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
MULTINODE_TIMEOUT=60
multinode_setup 3
. "$TOP/tests/etcd.sh"
etcd_up_nodes n0 n1 n2
# The q job's endpoint on each node: one member, not the same one (with the
# job's secret: without one the endpoint names the job, and the nodes must
# give the same one, lib/rdzv/wire.c's amldist__rz_token).
declare -A EPN=([n0]=$(node_addr n1):2379 [n1]=$(node_addr n1):2379 [n2]=$(node_addr n0):2379)
OUT=$TEST_TMP/out
mkdir -p "$OUT" "$TEST_TMP/ring"
CONF="keep_alive_interval=0.5,keep_alive_max_attempt=4,last_call_timeout=2,join_timeout=30"
NODES=(n0 n1 n2)
PY=$(command -v python3)
HANG=$TOP/tests/amlrun/ddp_hang.py
LINE=$(grep -n 'time.sleep(0.05)' "$HANG" | cut -d: -f1)
SEC=3

# n1's second address: a network of its own, that no other node reaches.
TWO=""
# (a veth pair within n1: a kernel without the dummy driver has veths)
if ip -n "$CLUSTER-n1" link add amlx type veth peer name amly 2>/dev/null &&
    ip -n "$CLUSTER-n1" addr add 10.232.0.11/24 dev amlx &&
    ip -n "$CLUSTER-n1" link set amly up && ip -n "$CLUSTER-n1" link set amlx up; then
    TWO=10.232.0.11
fi

declare -A PID
# job TAG NODE RUNID ARGS...: NODE's amlrun of the job in the background
# (its output in $OUT/TAG.NODE, PID[TAG.NODE]: the timeout(1) above it).
job() {
    local tag=$1 node=$2 id=$3 ep=$ETCD_EP
    shift 3
    [ "$tag" = q ] && ep=${EPN[$node]}
    on "$node" $T "$AMLRUN" --rdzv-backend etcd --rdzv-endpoint "$ep" --rdzv-id "$id" \
        --rdzv-conf "$CONF" --nproc-per-node 1 "$@" >"$OUT/$tag.$node" 2>&1 &
    PID[$tag.$node]=$!
}
# rcs TAG: the exit statuses of TAG's amlruns on n0 n1 n2, in RCS.
rcs() {
    local n r
    RCS=""
    for n in "${NODES[@]}"; do
        wait "${PID[$1.$n]}"
        r=$?
        RCS+="${RCS:+ }$r"
    done
}
# leads N: N decider keys held in etcd.
leads() {
    for _ in $(seq 150); do
        [ "$(etcd_left | grep -c '/b/lead$')" -ge "$1" ] && return 0
        nap 0.1
    done
    return 1
}
dump() {
    local f
    for f in "$OUT"/*.n*; do diag "--- $f"; diag "$(cat "$f")"; done
}

# The hang job: n1 first (the decider), then n0 and n2; n2's rank is the
# one that stops (STUCK_HOST: whichever rank the rendezvous gives it).
export RING_DIR=$TEST_TMP/ring STUCK_HOST=n2 STUCK_STEP=3
hang() { job hang "$1" hang --nnodes 3 --hang-timeout $SEC --python "$PY" "$HANG"; }
# The healthy job: a shell loop that prints every 0.2 s for 8 s.
WW='i=0; while [ $i -lt 40 ]; do echo "tick $i"; sleep 0.2; i=$((i + 1)); done'
hang n1
leads 1 || fail "the hang job: its decider key held"
hang n0
hang n2
for n in "${NODES[@]}"; do
    job well "$n" well --nnodes 3 --hang-timeout $SEC --no-python sh -c "$WW"
done

# The plane's address, once published (the hang job has no secret: its
# values are plain).
plane=""
for _ in $(seq 100); do
    key=$(etcd_left | grep '/b/plane$' | head -n 1)
    [ -n "$key" ] && plane=$(etcd_ctl get "$key" --print-value-only | tr -c '0-9.\n' ' ') && break
    nap 0.1
done
check "the plane's address published is n1's cluster address, the one etcd saw" \
    grep -qw "$(node_addr n1)" <<<"$plane"
bad=127.0.0.1
[ -n "$TWO" ] && bad="127.0.0.1 $TWO"
check "the plane's address is not loopback${TWO:+ nor the second address of n1}" \
    sh -c 'for a in $1; do case " $0 " in *" $a "*) exit 1 ;; esac; done' "$plane" "$bad"
[ -z "$TWO" ] && skip "the decider on a node of two addresses" "no second interface could be made on n1"

rcs well
expect_eq "a healthy job beside with --hang-timeout $SEC: every node exits 0" "$RCS" "0 0 0"
check "a healthy job: no hang said on any node" \
    sh -c '! grep -q "hang:" "$0"/well.n*' "$OUT"
rcs hang
got=$RCS
expect_eq "a hang of n2's rank: every node exits 124" "$got" "124 124 124"
e1=$OUT/hang.n1
check "the hang: the decider's node n1 says no rank of any node progressed" \
    grep -q "^amlrun: hang: no rank of any node showed progress for $SEC s" "$e1"
check "the hang: n1's report names n2's rank with its host, pid and line" \
    grep -Eq "^amlrun:   rank [0-9] \(host n2, pid [0-9]+\): ddp_hang\.py:$LINE stuck_in_python" "$e1"
check "the hang: the others' group waits in all_reduce" \
    grep -Eq "^amlrun:   ranks .* \(2\): .*all_reduce" "$e1"
check "the hang: the report is printed once, on n1" \
    sh -c "[ \$(cat '$OUT'/hang.n* | grep -c stuck_in_python) = 1 ]"
if [ "$got" != "124 124 124" ] || [ -n "${VERBOSE:-}" ]; then dump; fi
nap 3

# --status and --stacks, with the job's secret.
export AMLDIST_JOB_TOKEN
AMLDIST_JOB_TOKEN=$(job_secret plane)
QW="touch $OUT/up.\$RANK.\$WORLD_SIZE; while [ ! -e $OUT/stop ]; do sleep 0.2; done"
job q n1 q --nnodes 2:3 --max-restarts 1 --no-python sh -c "$QW"
leads 1 || fail "--status: the decider key held"
job q n0 q --nnodes 2:3 --max-restarts 1 --no-python sh -c "$QW"
job q n2 q --nnodes 2:3 --max-restarts 1 --no-python sh -c "$QW"
# up N W: N workers of a world of W started.
up() { wait_files "$OUT" "up\\..\\.$2" "$1" 20; }
# amlrun_of NODE: the q job's amlrun on NODE (the pid space is shared).
amlrun_of() {
    local p
    for p in $(netns_pids "$CLUSTER-$1"); do
        tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -q "^$AMLRUN .*--rdzv-id q " && echo "$p"
    done | head -n 1
}
# ranks NODE: "RANK HOST" of each rank with a pid, in --status=json asked
# on NODE of its amlrun.
ranks() {
    on "$1" $T "$AMLRUN" --status=json "$(amlrun_of "$1")" 2>"$OUT/status.err" | python3 -c 'import json,sys
j = json.load(sys.stdin)
hosts = {n["node"]: n["host"] for n in j.get("nodes", [])}
for r in sorted(j["ranks"], key=lambda r: r["rank"]):
    print(r["rank"], hosts.get(r.get("node"), "?") if r.get("pid", 0) > 0 else "no pid")'
}
hosts() { cut -d' ' -f2 | sort | tr '\n' ' '; }
up 3 3 || fail "--status: 3 workers started"
# (asked again for a few seconds: on a machine loaded past 400, once,
# n0's first ask came while its plane connection was not up yet, and was
# refused at once, as an ask with no decider reached is)
for i in $(seq 10); do
    got=$(ranks n0)
    [ "$(hosts <<<"$got")" = "n0 n1 n2 " ] && break
    [ "$i" = 1 ] && diag "--status on n0, first ask: $got $(cat "$OUT/status.err")"
    nap 0.5
done
expect_eq "--status on n0 (not the decider's node): a rank with a pid on each node" \
    "$(hosts <<<"$got")" "n0 n1 n2 "
expect_eq "--status: rank 0 is the decider's node's, n1" "$(head -n 1 <<<"$got")" "0 n1"
[ "$(hosts <<<"$got")" = "n0 n1 n2 " ] || diag "$got $(cat "$OUT/status.err")"
on n2 $T "$AMLRUN" --stacks "$(amlrun_of n2)" >"$OUT/stacks.out" 2>&1
expect_eq "--stacks on n2 (not the decider's node): exit 0" "$?" 0
check "--stacks on n2: the stacks of the 3 ranks of the 3 nodes" \
    grep -q "stacks of 3 ranks" "$OUT/stacks.out"

# The decider's amlrun SIGKILLed: n0 and n2 re-form, the plane follows.
kill -KILL "$(amlrun_of n1)"
up 2 2
expect_eq "n1's amlrun killed: n0 and n2 re-formed" "$NFILES" 2
for _ in $(seq 50); do
    got=$(ranks n0)
    [ "$(hosts <<<"$got")" = "n0 n2 " ] && break
    nap 0.2
done
expect_eq "n1's amlrun killed: --status on n0 shows the re-formed job's ranks, through the new decider" \
    "$(hosts <<<"$got")" "n0 n2 "
touch "$OUT/stop"
rcs q
got=$RCS
expect_eq "the re-formed job ends 0 on n0 and n2 (n1's killed)" "$got" "0 137 0"
if [ "$got" != "0 137 0" ] || [ -n "${VERBOSE:-}" ]; then
    dump
    diag "$(cat "$OUT/status.err")"
fi
expect_eq "no process left on any node" "$(leftovers)" ""
