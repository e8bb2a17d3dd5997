#!/usr/bin/env bash
# --timeout across nodes (mpirun's --timeout with --get-stack-traces): a
# 2-node job on the namespace cluster (static rendezvous, 2 ranks a node),
# every rank asleep in a Python function, rank 3 (node 1) in another one.
# When the time is up, node 0 (the rendezvous host's node) gathers every
# node's stacks and prints one report of all 4 ranks, reason timeout, with
# rank 3 the outlier on n1, and writes --hang-report; node 1 prints no
# report of its own and writes none; both exit 124 and nothing is left.
# Then node 0 without --timeout: node 1's own limit acts as the fallback,
# 30 s later, with its own ranks' report, and the job still ends (124); the
# two jobs run side by side.
# amldist-test: slow
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
MULTINODE_TIMEOUT=120
multinode_setup 2

d=$TEST_TMP/to
mkdir -p "$d"
cat >"$d/w.py" <<'PY'
import os, sys, time
def odd_one_out():
    time.sleep(1000)
def asleep_here():
    time.sleep(1000)
rank = os.environ["RANK"]
open(os.path.join(sys.argv[1], "up." + rank), "w").close()
odd_one_out() if rank == "3" else asleep_here()
PY
ODD=$(grep -n 'def odd_one_out' "$d/w.py" | cut -d: -f1)
ASLEEP=$(grep -n 'def asleep_here' "$d/w.py" | cut -d: -f1)
# Generous: the workers are asleep long before it.
SEC=15
# start TAG [SEC-OF-NODE-0]: both nodes, node 1 with --timeout $SEC, node 0
# with its own (none when not given); their files in $d/TAG.*, the workers'
# marks in $d/TAG/.  finish TAG waits for both.  The two jobs below run side
# by side, on ports of their own: the second waits out node 1's 30 s
# fallback while the first is checked.
declare -A pid0 pid1
start() {
    local tag=$1 n pid=()
    local -a opt=("${2:+--timeout $2}" "--timeout $SEC")
    mkdir -p "$d/$tag"
    for n in 0 1; do
        # shellcheck disable=SC2086 # ${opt[n]}: none, or an option and its value
        on n$n $T "$AMLRUN" ${opt[n]} --hang-report "$d/$tag.r$n.json" --nnodes 2 \
            --node-rank $n --master-addr n0 --master-port "$PORT" --nproc-per-node 2 \
            "$d/w.py" "$d/$tag" >"$d/$tag.out$n" 2>"$d/$tag.err$n" &
        pid[n]=$!
    done
    pid0[$tag]=${pid[0]} pid1[$tag]=${pid[1]}
    PORT=$((PORT + 7))
}
finish() {
    local tag=$1
    wait "${pid1[$tag]}"
    echo $? >"$d/$tag.rc1"
    wait "${pid0[$tag]}"
    echo $? >"$d/$tag.rc0"
}

start host $SEC
start fallback
finish host
e0=$d/host.err0 e1=$d/host.err1

expect_eq "node 0 exits 124" "$(cat "$d/host.rc0")" 124
expect_eq "node 1 exits 124" "$(cat "$d/host.rc1")" 124
expect_eq "every rank was asleep" "$(compgen -G "$d/host/up.*" | wc -l)" 4
check "node 0 reads the stacks of every node" \
    grep -q "^amlrun: --timeout $SEC: the job ran .*: reading the stacks of the ranks of every node" "$e0"
check "node 0 prints one report of the 4 ranks, reason timeout" \
    sh -c "[ \$(grep -c '^amlrun: timeout: the job ran for $SEC s; stacks of 4 ranks, 2 groups; likely cause: rank 3' '$e0') = 1 ]"
check "the report names rank 3 on n1 with its pid and line" \
    grep -Eq "^amlrun:   rank 3 \(host n1, pid [0-9]+\): w\.py:$((ODD + 1)) odd_one_out" "$e0"
check "the others' group spans both nodes" \
    grep -Eq "^amlrun:   ranks 0-2 \(3\).*: w\.py:$((ASLEEP + 1)) asleep_here" "$e0"
check "--hang-report on node 0: the 4 ranks of both nodes, reason timeout" \
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); \
sys.exit(0 if r['reason']=='timeout' and r['timeout_s']==$SEC and r['outliers']==[3] \
and sorted(x['rank'] for x in r['ranks'])==[0,1,2,3] \
and sorted(set(x['node'] for x in r['ranks']))==[0,1] else 1)" "$d/host.r0.json"
check "node 1 prints no report" \
    sh -c "! grep -Eq 'stacks of|asleep_here|odd_one_out|reading the stacks' '$e1'"
check "node 1 writes no --hang-report" test ! -e "$d/host.r1.json"
check "node 1 is stopped by node 0's --timeout" grep -q "host n0: --timeout $SEC: the job stops" "$e1"
if [ -n "${VERBOSE:-}" ]; then diag "$(cat "$e0" "$e1")"; fi

# --- node 0 without --timeout: node 1's own, 30 s later
finish fallback
expect_eq "fallback: every rank was asleep" "$(compgen -G "$d/fallback/up.*" | wc -l)" 4
e0=$d/fallback.err0 e1=$d/fallback.err1
expect_eq "fallback: node 0 exits 124" "$(cat "$d/fallback.rc0")" 124
expect_eq "fallback: node 1 exits 124" "$(cat "$d/fallback.rc1")" 124
check "fallback: node 1 reports its own ranks, 2-3, reason timeout" \
    grep -q "^amlrun: timeout: the job ran for $SEC s; stacks of 2 ranks, 2 groups" "$e1"
check "fallback: ... after its 30 s more" \
    grep -Eq "^amlrun: --timeout $SEC: the job ran (4[5-9]|[5-9][0-9])\.[0-9] s: reading the stacks of the 2 ranks" "$e1"
check "fallback: node 0 prints no report" sh -c "! grep -q 'stacks of' '$e0'"
check "fallback: node 0 is stopped by node 1's --timeout" grep -q "host n1: --timeout $SEC: the job stops" "$e0"
if [ -n "${VERBOSE:-}" ]; then diag "$(cat "$e0" "$e1")"; fi
expect_eq "no process left on any node" "$(leftovers)" ""
