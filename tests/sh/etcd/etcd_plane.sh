#!/usr/bin/env bash
# Issue 20's plane on the etcd rendezvous (lib/rdzv/etcd/plane*.c): the
# views, gathers and marks go over TCP to the address the decider's agent
# publishes in etcd, into the one decider.  Against a real etcd of one
# member (tests/etcd.sh), amlruns on loopback, the same line each:
#   - --hang-timeout across nodes: rank 1 (the other node's) stops calling
#     the progress API; the decider finds it from both nodes' views, and
#     both nodes exit 124 naming rank 1 (the decider's node the report,
#     the other its stop); beside it a healthy job of the same timeout
#     runs past it and ends 0, no "hang:" said;
#   - amlrun --status and --stacks from one node show every node's ranks,
#     asked of either node, with the job's secret (the plane's
#     connections behind the channel);
#   - the decider's amlrun SIGKILLed: another agent takes over, publishes
#     its own plane, the two left re-form, --status from one of them shows
#     both again, and a hang of rank 1 is then found by the new decider
#     and reported on its node (its stacks gathered there, not to the
#     first decider's node, which is gone).
# Cheap: short leases (2 s), timeouts of 2 s, sleeping shell and Python
# workers.
# amldist-test: slow (its cases wait out leases of 2 s)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/etcd.sh"
etcd_up 1
OUT=$TEST_TMP/out
mkdir -p "$OUT"
CONF="keep_alive_interval=0.5,keep_alive_max_attempt=4,last_call_timeout=0.5,join_timeout=30"
export OUT PYTHONPATH=$TOP/python OMP_NUM_THREADS=1
PY=$(command -v python3)
W=$TOP/tests/amlrun/healthy_worker.py

# pyjob TAG RUNID SEC MODES...: one amlrun of healthy_worker.py in the
# background (its output in $OUT/TAG.log, PID[TAG]).
pyjob() {
    local tag=$1 id=$2 sec=$3
    shift 3
    mkdir -p "$OUT/$id"
    timeout -k 5 60 "$AMLRUN" --rdzv-backend etcd --rdzv-endpoint "$ETCD_EP" --rdzv-id "$id" \
        --rdzv-conf "$CONF" --nnodes 2 --nproc-per-node 1 --hang-timeout 2 \
        --python "$PY" "$W" "$OUT/$id" "$sec" "$@" >"$OUT/$tag.log" 2>&1 &
    PID[$tag]=$!
}
# lead_held: the decider key is in etcd.
lead_held() {
    for _ in $(seq 100); do
        etcd_left | grep -q '/b/lead$' && return 0
        nap 0.1
    done
    return 1
}

# --hang-timeout across nodes: a (the decider's node: the first to come)
# and b; rank 1, b's, stalls after 3 steps.  Beside it, a healthy job.
pyjob a hang 30 api stall
lead_held || fail "hang: the decider key held"
pyjob b hang 30 api stall
pyjob c well 6 api api
pyjob d well 6 api api
waitall c d
expect_eq "a healthy job with --hang-timeout 2: both exit 0" "$RCS" "0 0"
check "a healthy job: no hang said on either node" \
    sh -c '! grep -q "hang:" "$0" "$1"' "$OUT/c.log" "$OUT/d.log"
waitall a b
expect_eq "a hang on the other node: both nodes exit 124" "$RCS" "124 124"
check "a hang: the decider's node names rank 1, as the decider saw every node" \
    grep -q "hang: rank 1 of the job made no progress.*as the rendezvous host saw every node" "$OUT/a.log"
check "a hang: the other node says it was the hang" grep -q "hang" "$OUT/b.log"
if [ "$RCS" != "124 124" ] || [ -n "${VERBOSE:-}" ]; then dump; fi
nap 0.5

# --status and --stacks from either node: every node's ranks.  The q
# job's worker: its up file, then progress every 0.2 s until OUT/stop; in
# a world of 2 (the decider killed) rank 1 stops once OUT/stall is there.
QW=$TEST_TMP/q_worker.py
cat >"$QW" <<'EOF'
import os, time, amldist
out = os.environ["OUT"]
rank, world = int(os.environ["RANK"]), os.environ["WORLD_SIZE"]
open("%s/up.%d.%s" % (out, rank, world), "w").close()
step = 0
while not os.path.exists(out + "/stop"):
    time.sleep(0.2)
    step += 1
    if not (world == "2" and rank == 1 and os.path.exists(out + "/stall")):
        amldist.progress(step)
EOF
# qjob TAG: one amlrun of the q job (its output in $OUT/TAG.log).
qjob() {
    timeout -k 5 60 "$AMLRUN" --rdzv-backend etcd --rdzv-endpoint "$ETCD_EP" --rdzv-id q \
        --rdzv-conf "$CONF" --nnodes 2:3 --max-restarts 1 --nproc-per-node 1 \
        --hang-timeout 2 --python "$PY" "$QW" >"$OUT/$1.log" 2>&1 &
    PID[$1]=$!
}
# up N: N workers started (files up.*).
up() { wait_files "$OUT" 'up\.' "$1"; }
amlrun_of() { ps -o pid= --ppid "${PID[$1]}" | tr -d ' '; }
# ranks TAG: "RANK NODE" of each rank with a pid, in --status=json of
# TAG's amlrun.
ranks() {
    "$AMLRUN" --status=json "$(amlrun_of "$1")" 2>"$OUT/status.err" | python3 -c 'import json,sys
j = json.load(sys.stdin)
for r in sorted(j["ranks"], key=lambda r: r["rank"]):
    print(r["rank"], r.get("node"), "pid" if r.get("pid", 0) > 0 else "no pid")'
}
# With the job's secret: the plane's connections are the channel's.
export AMLDIST_JOB_TOKEN
AMLDIST_JOB_TOKEN=$(job_secret plane)
qjob a
lead_held || fail "--status: the decider key held"
qjob b
qjob c
up 3 || fail "--status: 3 workers started"
want="0 0 pid
1 1 pid
2 2 pid"
expect_eq "--status from a node not the decider's: every rank of the 3 nodes, with a pid" \
    "$(ranks b)" "$want"
expect_eq "--status from the decider's node: the same" "$(ranks a)" "$want"
"$AMLRUN" --stacks "$(amlrun_of c)" >"$OUT/stacks.out" 2>&1
expect_eq "--stacks from a node not the decider's: exit 0" "$?" 0
check "--stacks: the stacks of the 3 ranks of the 3 nodes" \
    grep -q "stacks of 3 ranks" "$OUT/stacks.out"

# The decider's amlrun SIGKILLed: b and c re-form (a world of 2), and
# the plane follows the decider: --status, then a hang of rank 1 found by
# the new decider, its node reporting it.
kill -KILL "$(amlrun_of a)"
wait_files "$OUT" 'up\..\.2' 2
expect_eq "the decider killed: the two left re-formed" "$NFILES" 2
got=""
for _ in $(seq 50); do
    got=$(ranks b)
    [ "$got" = "0 0 pid
1 1 pid" ] && break
    nap 0.2
done
expect_eq "the decider killed: --status from one of the two left shows both" "$got" "0 0 pid
1 1 pid"
touch "$OUT/stall"
waitall a b c
expect_eq "the decider killed, then a hang: the two left exit 124" "${RCS#* }" "124 124"
check "the decider killed, then a hang: the new decider's node names rank 1" \
    grep -q "hang: rank 1 of the job made no progress.*as the rendezvous host saw every node" \
    "$OUT/b.log" "$OUT/c.log"
if [ "${RCS#* }" != "124 124" ] || [ -n "${VERBOSE:-}" ]; then
    dump
    diag "$(cat "$OUT/status.err")"
fi
nap 3
expect_eq "nothing left in etcd" "$(etcd_left)" ""
