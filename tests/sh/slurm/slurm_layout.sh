#!/usr/bin/env bash
# A real Slurm (tests/slurm.sh: two slurmd on two namespace nodes) starts
# amlrun in every way Slurm can (issue 11): srun per process with
# --mpi=none, pmi2 and pmix; block, cyclic and uneven task layouts; and
# head-node mode (`amlrun --launcher slurm`) inside salloc and sbatch, which
# builds the srun command itself.  Every worker reports RANK, LOCAL_RANK,
# NODE_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT; the
# test compares the whole set with the layout Slurm was asked for.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/slurm.sh"
slurm_setup

block() { want_slurm_layout n0 29500 4 n0:0:0:0:2 n0:0:1:1:2 n1:1:2:0:2 n1:1:3:1:2; }

# srun per process: amlrun reads the step's layout and execs the command.
# (No secret of the user's here: the note below is the one without.)
unset AMLDIST_JOB_TOKEN AMLDIST_JOB_TOKEN_FILE
export XDG_CONFIG_HOME=$TEST_TMP/no-secret
for mpi in none pmi2 pmix; do
    if [ ! -e "$SLURM_PLUGINS/mpi_$mpi.so" ]; then
        skip "srun --mpi=$mpi amlrun: layout" "no mpi/$mpi plugin in $SLURM_PLUGINS"
        continue
    fi
    out=$(slurm_on n0 $T srun --mpi=$mpi -N2 --ntasks-per-node 2 "$AMLRUN" "$REPORT" 2>"$TEST_TMP/err")
    expect_eq "srun --mpi=$mpi -N2 --ntasks-per-node 2 amlrun: layout" \
        "$(by_rank <<<"$out")" "$(block)"
    [ -s "$TEST_TMP/err" ] && diag "stderr: $(head -c 600 "$TEST_TMP/err")"
    # In place there is no control plane: each node's note (no secret
    # here) names the bootstrap only (issue 38).
    expect_eq "srun --mpi=$mpi amlrun: one note per node, of the bootstrap, none of a control plane" \
        "$(grep -c "^amlrun: note: no secret: this job's bootstrap is open" "$TEST_TMP/err"):$(grep -c "control plane" "$TEST_TMP/err")" 2:0
done

# What the MPI plugins add is the same step: PMI_JOBID and PMIX_NAMESPACE
# name it (this is what lib/layout/merge.c merges on).
got=$(slurm_on n0 $T srun --mpi=pmi2 -N2 -n2 sh -c \
      'echo "$PMI_RANK/$PMI_SIZE $PMI_JOBID $SLURM_JOB_ID.$SLURM_STEP_ID"' |
      awk '{print $1, ($2 == $3) ? "same" : $2 " vs " $3}' | sort | tr '\n' ';')
expect_eq "srun --mpi=pmi2: PMI_JOBID is SLURM_JOB_ID.SLURM_STEP_ID" "$got" "0/2 same;1/2 same;"
if [ -e "$SLURM_PLUGINS/mpi_pmix.so" ]; then
    got=$(slurm_on n0 $T srun --mpi=pmix -N2 -n2 sh -c \
          'echo "$PMIX_RANK $PMIX_NAMESPACE slurm.pmix.$SLURM_JOB_ID.$SLURM_STEP_ID"' |
          awk '{print $1, ($2 == $3) ? "same" : $2 " vs " $3}' | sort | tr '\n' ';')
    expect_eq "srun --mpi=pmix: PMIX_NAMESPACE is slurm.pmix.<job>.<step>" "$got" "0 same;1 same;"
    # The explanation says which side gave what.
    got=$(slurm_on n0 $T srun --mpi=pmix -N2 -n2 "$BUILD/examples/hello" --explain 2>&1 |
          grep -E '^EXPLAIN_(RANK|LOCAL_RANK)=' | sort -u | tr '\n' ';')
    diag "pmix explained: $got"
fi

# Task distributions: cyclic puts rank 1 on n1; uneven gives n0 two tasks
# and n1 one, so LOCAL_WORLD_SIZE differs between the nodes.
out=$(slurm_on n0 $T srun -N2 --ntasks-per-node 2 -m cyclic "$AMLRUN" "$REPORT")
expect_eq "srun -N2 --ntasks-per-node 2 -m cyclic amlrun: layout" "$(by_rank <<<"$out")" \
    "$(want_slurm_layout n0 29500 4 n0:0:0:0:2 n1:1:1:0:2 n0:0:2:1:2 n1:1:3:1:2)"
out=$(slurm_on n0 $T srun -N2 -n3 "$AMLRUN" "$REPORT")
expect_eq "srun -N2 -n3 amlrun (uneven, block): layout" "$(by_rank <<<"$out")" \
    "$(want_slurm_layout n0 29500 3 n0:0:0:0:2 n0:0:1:1:2 n1:1:2:0:1)"
out=$(slurm_on n0 $T srun -N2 -n3 -m cyclic --mpi=pmi2 "$AMLRUN" "$REPORT")
expect_eq "srun -N2 -n3 -m cyclic --mpi=pmi2 amlrun (uneven, cyclic): layout" "$(by_rank <<<"$out")" \
    "$(want_slurm_layout n0 29500 3 n0:0:0:0:2 n1:1:1:0:1 n0:0:2:1:2)"

# Head-node mode inside an allocation: amlrun builds and runs
#   srun --nodes=2 --ntasks=2 --ntasks-per-node=1 ... amlrun --nproc-per-node 2
out=$(slurm_on n0 $T salloc -N2 "$AMLRUN" --launcher slurm --nproc-per-node 2 \
      --master-port 29511 "$REPORT" 2>"$TEST_TMP/err")
expect_eq "salloc -N2 amlrun --launcher slurm --nproc-per-node 2: layout" \
    "$(by_rank <<<"$out")" \
    "$(want_slurm_layout n0 29511 4 n0:0:0:0:2 n0:0:1:1:2 n1:1:2:0:2 n1:1:3:1:2)"
got=$(slurm_on n0 $T salloc -N2 "$AMLRUN" --launcher slurm --nproc-per-node 2 --dry-run "$REPORT" 2>/dev/null)
expect_eq "salloc: amlrun --launcher slurm --dry-run prints the srun command" "$got" \
    "srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --cpu-bind=none --kill-on-bad-exit=1 $AMLRUN --nproc-per-node 2 --nnodes 2 $REPORT"
# sbatch: the batch script (not a task) is the head node; SLURM_JOB_ID
# alone selects srun.
slurm_on n0 $T sbatch --wait -N2 -o "$TEST_TMP/batch.out" \
    --wrap "$AMLRUN --nproc-per-node 2 --hosts n0,n1 $REPORT" >/dev/null 2>"$TEST_TMP/err" ||
    diag "sbatch: $(cat "$TEST_TMP/err")"
expect_eq "sbatch -N2: amlrun --hosts n0,n1 --nproc-per-node 2 (srun chosen by SLURM_JOB_ID): layout" \
    "$(by_rank <"$TEST_TMP/batch.out")" "$(block)"
slurm_on n0 $T sbatch --wait -N2 --ntasks-per-node 3 -o "$TEST_TMP/batch3.out" \
    --wrap "$AMLRUN --launcher slurm --nproc-per-node 3 $REPORT" >/dev/null 2>"$TEST_TMP/err" ||
    diag "sbatch: $(cat "$TEST_TMP/err")"
expect_eq "sbatch -N2: amlrun --launcher slurm --nproc-per-node 3: layout" \
    "$(by_rank <"$TEST_TMP/batch3.out")" \
    "$(want_slurm_layout n0 29500 6 n0:0:0:0:3 n0:0:1:1:3 n0:0:2:2:3 n1:1:3:0:3 n1:1:4:1:3 n1:1:5:2:3)"

expect_eq "no process left on any node (but the Slurm daemons)" "$(slurm_leftovers)" ""
