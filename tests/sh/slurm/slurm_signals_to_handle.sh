#!/usr/bin/env bash
# Slurm's early warning (`scancel --signal=USR1`, as `sbatch --signal=USR1@T`
# sends before the time limit) under a real Slurm (tests/slurm.sh), one
# amlrun per node by srun: with --signals-to-handle SIGTERM,SIGUSR1 (torchrun
# 2.x's option, as Slurm users give it) SIGUSR1 reaches every worker and
# stops the job, 128+10; without it, amlrun passes SIGUSR1 on and the job
# goes on (its workers end on their own here: 0).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/slurm.sh"
slurm_setup

S=$TEST_TMP/usr1worker.sh
mkdir -p "$TEST_TMP/sig"
# (Slurm's proctrack/linuxproc signals every process of the step too, and
# amlrun the worker's whole group: the trap runs no child that the second
# SIGUSR1 could kill.)
cat >"$S" <<EOF2
#!/bin/sh
host=\$(hostname)
trap 'echo "\$host \$RANK USR1" >"$TEST_TMP/sig/usr1.\$RANK"; exit 0' USR1
echo ready >"$TEST_TMP/sig/ready.\$RANK"
# A sleep killed by the signal before the shell's trap runs must not end
# the worker: sleep again until the trap has run.
for _ in \$(seq 300); do sleep 1 & wait; done
EOF2
chmod +x "$S"

# usr1 NAME AMLRUN-ARGS...: an sbatch job of two nodes (srun: one amlrun per
# node, 2 workers each); once the four workers run, scancel --signal=USR1;
# sets RC (the job's exit code as sacct-less Slurm's squeue/scontrol gives
# it: the srun's status, written by the batch script).
usr1() {
    local name=$1 id
    shift
    rm -f "$TEST_TMP"/sig/*
    id=$(slurm_on n0 $T sbatch --parsable -N2 -o "$TEST_TMP/usr1.out" \
         --wrap "srun --ntasks-per-node 1 $AMLRUN --nproc-per-node 2 --term-timeout 5 $* $S; echo srun-status=\$? >$TEST_TMP/sig/status")
    for _ in $(seq 200); do
        [ "$(ls "$TEST_TMP/sig" | grep -c '^ready')" = 4 ] && break
        sleep 0.1
    done
    expect_eq "$name: the job's four workers started" "$(ls "$TEST_TMP/sig" | grep -c '^ready')" 4
    slurm_on n0 scancel --signal=USR1 "$id"
    for _ in $(seq 300); do
        [ -e "$TEST_TMP/sig/status" ] && break
        sleep 0.1
    done
    RC=$(sed -n 's/^srun-status=//p' "$TEST_TMP/sig/status" 2>/dev/null)
    diag "$name: $(cat "$TEST_TMP"/sig/usr1.* 2>/dev/null | tr "\n" ";") $(tr "\n" ";" <"$TEST_TMP/usr1.out")"
    slurm_on n0 scancel "$id" 2>/dev/null
}

usr1 "--signals-to-handle SIGTERM,SIGUSR1" --signals-to-handle SIGTERM,SIGUSR1
# The node whose SIGUSR1 comes second may have been told to stop by the
# first (the control plane: SIGTERM to its workers) before its own came.
check "listed SIGUSR1: the workers of at least one node got it" \
    test "$(ls "$TEST_TMP/sig" | grep -c '^usr1\.')" -ge 2
expect_eq "listed SIGUSR1: the job stops with 128+10" "$RC" 138
check "listed SIGUSR1: both nodes' amlruns exit 138" \
    test "$(grep -c 'task [01]: Exited with exit code 138' "$TEST_TMP/usr1.out")" = 2
check "listed SIGUSR1: amlrun says SIGUSR1 stops the job" \
    grep -q "^amlrun: SIGUSR1 received" "$TEST_TMP/usr1.out"

usr1 "amlrun's default (no --signals-to-handle)"
expect_eq "SIGUSR1 passed on: every worker got it" "$(ls "$TEST_TMP/sig" | grep -c '^usr1\.')" 4
expect_eq "SIGUSR1 passed on: the job went on; its workers ended 0" "$RC" 0
check "SIGUSR1 passed on: no stop said" sh -c "! grep -q 'SIGUSR1 received' '$TEST_TMP/usr1.out'"
