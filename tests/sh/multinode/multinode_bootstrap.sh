#!/usr/bin/env bash
# libamldist's NCCL-id exchange (amldist_bootstrap_bcast, driven by
# examples/bootstrap_hello) across two nodes: rank 0 on n0 hands its blob
# to the ranks on n1 over the bridge, in the standalone, mpirun and
# head-node modes; a node with another job token is refused.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
HELLO=$BUILD/examples/bootstrap_hello
if [ ! -x "$HELLO" ]; then
    fail "multi-node bootstrap: $HELLO is built"
    exit 1
fi
multinode_setup 2
# Each line says where the receiving rank ran.
WRAP=$TEST_TMP/where.sh
printf '#!/bin/sh\nout=$(%s) ; rc=$?\necho "$(hostname) $out"\nexit $rc\n' "$HELLO" >"$WRAP"
chmod +x "$WRAP"

# bcast_ok NAME OUTPUT: four ranks, two per node, all got rank 0's blob.
bcast_ok() {
    local name=$1 out=$2 pid
    pid=$(sed -n 's/.*hello from rank 0 (pid \([0-9]*\) on n0)$/\1/p' <<<"$out" | sort -u)
    local want got
    want=$(printf 'n%s rank %s/4 got: hello from rank 0 (pid %s on n0)\n' "${@:3}" | sed "s/PID/$pid/g")
    got=$(sort -t' ' -k3,3n <<<"$out")
    if [ -n "$pid" ] && [ "$(wc -l <<<"$pid")" = 1 ] && [ "$got" = "$want" ]; then ok "$name"
    else fail "$name"; diag "got: $out"; sed 's/^/# stderr: /' "$TEST_TMP"/e[0-9] 2>/dev/null; fi
}
by_slot=(0 0 PID 0 1 PID 1 2 PID 1 3 PID)

on n0 $T "$AMLRUN" --nnodes 2 --node-rank 0 --master-addr n0 --master-port "$PORT" \
    --nproc-per-node 2 "$WRAP" >"$TEST_TMP/b0" 2>"$TEST_TMP/e0" &
on n1 $T "$AMLRUN" --nnodes 2 --node-rank 1 --master-addr n0 --master-port "$PORT" \
    --nproc-per-node 2 "$WRAP" >"$TEST_TMP/b1" 2>"$TEST_TMP/e1"
wait
bcast_ok "bootstrap bcast across nodes: standalone amlrun on each" \
    "$(cat "$TEST_TMP/b0" "$TEST_TMP/b1")" "${by_slot[@]}"
# The job's success line, once: node 0's, with the job's rank count.
check "standalone amlrun on each: node 0 ends with the job's success line" \
    grep -q '^amlrun: 4 ranks exited 0 in [0-9.]* s (restarts 0)$' "$TEST_TMP/e0"
check "standalone amlrun on each: node 1 prints none" \
    sh -c "! grep -q 'exited 0 in' '$TEST_TMP/e1'"
# Without a secret, each node's amlrun says once that the plane is open.
for n in 0 1; do
    expect_eq "no secret: n$n's amlrun says once that the plane is open, nothing else" \
        "$(grep -v '^amlrun: 4 ranks exited 0 in' "$TEST_TMP/e$n" | sed 's/;.*//')" \
        "amlrun: note: no secret: this job's control plane and bootstrap are open to anyone who can reach their ports"
done

# The same with the job's secret (issue 21): every connection the channel's.
SECRET=$(job_secret bs-secret)
AMLDIST_JOB_TOKEN=$SECRET on n0 $T "$AMLRUN" --nnodes 2 --node-rank 0 --master-addr n0 \
    --master-port $((PORT + 4)) --nproc-per-node 2 "$WRAP" >"$TEST_TMP/b0" 2>"$TEST_TMP/s0" &
AMLDIST_JOB_TOKEN=$SECRET on n1 $T "$AMLRUN" --nnodes 2 --node-rank 1 --master-addr n0 \
    --master-port $((PORT + 4)) --nproc-per-node 2 "$WRAP" >"$TEST_TMP/b1" 2>"$TEST_TMP/s1"
wait
bcast_ok "bootstrap bcast across nodes: standalone amlrun on each, with a secret" \
    "$(cat "$TEST_TMP/b0" "$TEST_TMP/b1")" "${by_slot[@]}"

# (the ranks' lines on stdout; stderr apart: on a loaded machine Open MPI
# may warn there that setpgid() lost a race with its child's exec)
bcast_ok "bootstrap bcast across nodes: mpirun --map-by node (no amlrun)" \
    "$(on n0 $T $MPIRUN --host n0:2,n1:2 --map-by node "$WRAP" 2>"$TEST_TMP/e1")" \
    0 0 PID 1 1 PID 0 2 PID 1 3 PID
bcast_ok "bootstrap bcast across nodes: mpirun amlrun" \
    "$(on n0 $T $MPIRUN --host n0:2,n1:2 "$AMLRUN" "$WRAP" 2>"$TEST_TMP/e2")" "${by_slot[@]}"
# In place (per-process mode) there is no control plane: each node's first
# amlrun says once that the bootstrap is open, and names no plane.
expect_eq "mpirun amlrun, no secret: one note per node, the bootstrap's only" \
    "$(grep -c "^amlrun: note: no secret: this job's bootstrap is open to anyone who can reach its port; amlrun --make-secret closes it (see amldist_bootstrap(3), JOB TOKEN)$" "$TEST_TMP/e2")" 2
check "mpirun amlrun, no secret: no word of a control plane" \
    sh -c '! grep -q "control plane" "$0"' "$TEST_TMP/e2"
bcast_ok "bootstrap bcast across nodes: head-node amlrun --hosts" \
    "$(on n0 $T "$AMLRUN" --hosts n0:2,n1:2 "$WRAP" 2>"$TEST_TMP/e3")" "${by_slot[@]}"

# A node holding another job's token is refused, and the job fails on both
# nodes within the bootstrap timeout instead of hanging.
PORT=$((PORT + 2))
export AMLDIST_BOOTSTRAP_TIMEOUT=5
rc0=0 rc1=0
AMLDIST_JOB_TOKEN=$(job_secret job-a) on n0 $T "$AMLRUN" --nnodes 2 --node-rank 0 --master-addr n0 \
    --master-port "$PORT" --nproc-per-node 2 "$HELLO" >"$TEST_TMP/t0" 2>&1 &
pid0=$!
AMLDIST_JOB_TOKEN=$(job_secret job-b) on n1 $T "$AMLRUN" --nnodes 2 --node-rank 1 --master-addr n0 \
    --master-port "$PORT" --nproc-per-node 2 "$HELLO" >"$TEST_TMP/t1" 2>&1 || rc1=$?
wait $pid0 || rc0=$?
# Failed, and not ended by the test's deadline ($T, whose status is 124):
# the 5 s bootstrap timeout or the refusal ended them.
check "another job's token: both nodes fail ($rc0, $rc1), not by the test's deadline" \
    test "$rc0" -ne 0 -a "$rc1" -ne 0 -a "$rc0" -ne 124 -a "$rc1" -ne 124
check "another job's token: n1 says it was refused" grep -qi 'token\|EDENIED\|refused' "$TEST_TMP/t1"
diag "n1 said: $(grep -m1 -i 'token\|EDENIED\|refused' "$TEST_TMP/t1")"
unset AMLDIST_BOOTSTRAP_TIMEOUT

expect_eq "no process left on any node" "$(leftovers)" ""
