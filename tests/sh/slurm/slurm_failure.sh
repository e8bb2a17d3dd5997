#!/usr/bin/env bash
# Failures under a real Slurm (tests/slurm.sh): rank 3 (on n1) exits 7
# while the others run.  The job's status must be 7, the first failing
# rank's, in head-node mode (`amlrun --launcher slurm` in salloc and
# sbatch) and with per-node amlruns under a plain `srun --kill-on-bad-exit`:
# srun exits with its tasks' highest status, and the amlrun on n0, stopped
# by the step's SIGTERM, exits 1 rather than 143.  Then scancel: every
# worker gets the signal, and nothing is left on any node.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/slurm.sh"
slurm_setup

# Rank 3 fails once every other worker runs (its mark up.RANK beside the
# script; 20 s at most).
W=$TEST_TMP/worker.sh
cat >"$W" <<'EOF2'
#!/bin/sh
d=${0%/*}
if [ "$RANK" = 3 ]; then
    n=0
    until { [ -e "$d/up.0" ] && [ -e "$d/up.1" ] && [ -e "$d/up.2" ]; } || [ $n -ge 400 ]; do
        sleep 0.05; n=$((n + 1))
    done
    echo "rank $RANK fails on $(hostname)"; exit 7
fi
: >"$d/up.$RANK"
echo "rank $RANK runs on $(hostname)"
exec sleep 300
EOF2
chmod +x "$W"

# run_job NAME CMD...: run on n0; sets RC, ELAPSED (ms), OUT, ERR.
run_job() {
    local name=$1 t0 t1
    shift
    rm -f "$TEST_TMP"/up.*
    t0=$(date +%s%N)
    RC=0
    slurm_on n0 $T "$@" >"$TEST_TMP/out" 2>"$TEST_TMP/err" || RC=$?
    t1=$(date +%s%N)
    ELAPSED=$(((t1 - t0) / 1000000))
    OUT=$(cat "$TEST_TMP/out")
    ERR=$(cat "$TEST_TMP/err")
    diag "$name: status $RC after ${ELAPSED} ms"
}
has() {
    if grep -qE -- "$3" <<<"$2"; then ok "$1"; else fail "$1"; diag "no /$3/ in: $2"; fi
}
# Nothing but the daemons may be left once a job is over (slurmstepd may
# take a moment to go).
no_leftovers() {
    expect_eq "$1: no process left on any node" "$(settled 50 0.1 slurm_leftovers)" ""
}

run_job "head-node (salloc)" salloc -N2 "$AMLRUN" --launcher slurm --nproc-per-node 2 \
    --term-timeout 3 "$W"
expect_eq "salloc + amlrun --launcher slurm, rank 3 on n1 exits 7: job status 7" "$RC" 7
has "head-node: n1's amlrun names rank 3 and its status" "$ERR" \
    'amlrun: rank 3 \(local 1, pid [0-9]+, host n1\): exited with status 7'
# (the workers sleep 300 s, beyond the test's timeout T: a job that waited
# for them would end by that timeout, 124, not with the rank's 7)
no_leftovers "head-node (salloc)"

rm -f "$TEST_TMP"/up.*
slurm_on n0 $T sbatch --wait -N2 -o "$TEST_TMP/batch.out" \
    --wrap "$AMLRUN --launcher slurm --nproc-per-node 2 --term-timeout 3 $W" >/dev/null 2>&1
RC=$?
expect_eq "sbatch --wait + amlrun --launcher slurm, rank 3 exits 7: job status 7" "$RC" 7
has "sbatch: the job's output names rank 3" "$(cat "$TEST_TMP/batch.out")" \
    'amlrun: rank 3 \(local 1, pid [0-9]+, host n1\): exited with status 7'
no_leftovers "head-node (sbatch)"

# The same by hand: a plain srun of one amlrun per node.
run_job "srun per node" srun -N2 --ntasks-per-node 1 --kill-on-bad-exit=1 \
    "$AMLRUN" --nproc-per-node 2 --term-timeout 3 "$W"
expect_eq "srun --kill-on-bad-exit amlrun --nproc-per-node 2, rank 3 exits 7: job status 7" "$RC" 7
no_leftovers "srun per node"
# Without --kill-on-bad-exit srun waits for the other tasks, which end on
# their own here: still 7.
run_job "srun per node, no kill" srun -N2 --ntasks-per-node 1 --kill-on-bad-exit=0 \
    "$AMLRUN" --nproc-per-node 2 --term-timeout 3 -- sh -c \
    '[ "$RANK" = 3 ] && exit 7; sleep 2'
expect_eq "srun amlrun --nproc-per-node 2 (no kill-on-bad-exit), rank 3 exits 7: job status 7" "$RC" 7

# Per process, amlrun has exec'd the command: srun's rule alone decides.
# Ranks that end on their own leave the first failure's status...
run_job "srun per process" srun -N2 --ntasks-per-node 2 "$AMLRUN" -- sh -c \
    '[ "$RANK" = 3 ] && exit 7; sleep 2'
expect_eq "srun amlrun (per process), rank 3 exits 7, the others end: job status 7" "$RC" 7
# ... but under --kill-on-bad-exit the others die of the step's SIGTERM,
# and srun reports the highest, 143 (documented in the README).
run_job "srun per process, kill" srun -N2 --ntasks-per-node 2 --kill-on-bad-exit=1 "$AMLRUN" "$W"
expect_eq "srun --kill-on-bad-exit amlrun (per process): srun's highest status, 143" "$RC" 143
no_leftovers "srun per process"

# scancel: head-node job in sbatch; each worker records the SIGTERM it gets.
# The step's SIGTERM reaches a worker twice (from slurmstepd and from
# amlrun), so the trap runs no child that a second one could kill.
S=$TEST_TMP/sigworker.sh
mkdir -p "$TEST_TMP/sig"
cat >"$S" <<EOF2
#!/bin/sh
host=\$(hostname)
trap 'echo "\$host \$RANK TERM" >"$TEST_TMP/sig/\$RANK"; exit 0' TERM
echo ready >"$TEST_TMP/sig/ready.\$RANK"
sleep 300 & wait
EOF2
chmod +x "$S"
# cancel NAME ARGS...: a head-node job in sbatch whose four workers record
# SIGTERM, cancelled with `scancel ARGS... <job>` once all four run.
cancel() {
    local name=$1 id
    shift
    rm -f "$TEST_TMP"/sig/*
    id=$(slurm_on n0 $T sbatch --parsable -N2 -o "$TEST_TMP/cancel.out" \
         --wrap "$AMLRUN --launcher slurm --nproc-per-node 2 --term-timeout 5 $S")
    for _ in $(seq 100); do
        [ "$(ls "$TEST_TMP/sig" | grep -c '^ready')" = 4 ] && break
        sleep 0.1
    done
    expect_eq "$name: the job's four workers started" "$(ls "$TEST_TMP/sig" | grep -c '^ready')" 4
    t0=$(date +%s%N)
    slurm_on n0 scancel "$@" "$id"
    for _ in $(seq 150); do
        [ -z "$(slurm_on n0 squeue -h -j "$id" 2>/dev/null)" ] && break
        sleep 0.1
    done
    diag "$name: job gone after $((($(date +%s%N) - t0) / 1000000)) ms"
    # The job leaves squeue before the last trap has written its file.
    for _ in $(seq 50); do
        [ "$(ls "$TEST_TMP/sig" | grep -c '^[0-9]$')" = 4 ] && break
        sleep 0.1
    done
}
# Both nodes' amlruns stop their workers for the SIGTERM: each for its
# own, or, when the other node's came first, told by the control plane
# (its stop then names the other node's SIGTERM, and the job may be over
# before its own arrives).  Not every worker's trap may run: the step's
# second SIGTERM and srun's forced termination race it.  The workers of
# at least one node record it.
cancel "scancel"
check "scancel: both nodes' amlruns stop for the SIGTERM, at least one for its own" \
    sh -c 'grep -q "^amlrun: SIGTERM received" "$0" &&
           [ "$(grep -c "SIGTERM received" "$0")" -ge 2 ]' "$TEST_TMP/cancel.out"
got=$(cat "$TEST_TMP"/sig/[0-9] 2>/dev/null | sort -k2n | tr '\n' ';')
check "scancel: the workers of at least one node got SIGTERM ($got)" \
    sh -c 'case "$0" in *"n0 0 TERM;n0 1 TERM;"* | *"n1 2 TERM;n1 3 TERM;"*) exit 0 ;; esac; exit 1' "$got"
no_leftovers "scancel"
