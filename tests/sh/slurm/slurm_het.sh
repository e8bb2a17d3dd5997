#!/usr/bin/env bash
# Heterogeneous steps on a real Slurm (tests/slurm.sh), issue 22:
# `srun -w n1 -n1 CMD : -w n0 -n2 CMD` numbers the nodes in component order
# (SLURM_NODEID 0 is n1) while SLURM_STEP_NODELIST and
# SLURM_STEP_TASKS_PER_NODE are sorted by name: pairing them gave n1 two
# local ranks and n0 one, refused the rank whose local rank did not fit, and
# named n0 the master.  Each layout is checked three ways (slurm_step) and a
# gloo DDP job must run on it.  Heterogeneous jobs need the backfill
# scheduler (slurmctld refuses them otherwise).
# amldist-test: slow (one of the longest: tests/run.sh starts it early)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/slurm.sh"
SLURM_TIMEOUT=120
SLURM_SCHEDULER=sched/backfill
slurm_setup
with_torch=1
have_torch torch.distributed || with_torch=0

for mpi in none pmi2 pmix; do
    if [ ! -e "$SLURM_PLUGINS/mpi_$mpi.so" ]; then
        skip "srun --mpi=$mpi A : B" "no mpi/$mpi plugin in $SLURM_PLUGINS"
        continue
    fi
    slurm_step "srun --mpi=$mpi -w n1 -n1 : -w n0 -n2" "n1 n0 n0" \
        --mpi=$mpi -w n1 -n1 CMD : -w n0 -n2 CMD
    if [ "$mpi" != pmix ] && [ "$with_torch" = 1 ]; then
        slurm_ddp "DDP: srun --mpi=$mpi -w n1 -n1 amlrun train.py : -w n0 -n2 amlrun train.py" \
            --mpi=$mpi -w n1 -n1 CMD : -w n0 -n2 CMD
    fi
done
# Neighbours: components in name order; two tasks first, on n1.
slurm_step "srun -w n0 -n2 : -w n1 -n1" "n0 n0 n1" -w n0 -n2 CMD : -w n1 -n1 CMD
slurm_step "srun -w n1 -n2 : -w n0 -n1" "n1 n1 n0" -w n1 -n2 CMD : -w n0 -n1 CMD
# Inside a heterogeneous allocation: srun --het-group=0,1.
out=$(slurm_on n0 $T salloc -w n1 -n1 : -w n0 -n2 srun --het-group=0,1 "$AMLRUN" "$REPORT" 2>"$TEST_TMP/err")
expect_eq "salloc -w n1 -n1 : -w n0 -n2 srun --het-group=0,1 amlrun: layout" \
    "$(by_rank <<<"$out")" \
    "$(want_slurm_layout n1 29500 3 n1:0:0:0:1 n0:1:1:0:2 n0:1:2:1:2)"
# One amlrun per node, one component each.
out=$(slurm_on n0 $T srun -w n1 -n1 "$AMLRUN" --nproc-per-node 2 "$REPORT" : \
      -w n0 -n1 "$AMLRUN" --nproc-per-node 2 "$REPORT" 2>"$TEST_TMP/err")
expect_eq "srun -w n1 amlrun --nproc-per-node 2 : -w n0 amlrun --nproc-per-node 2: layout" \
    "$(by_rank <<<"$out")" \
    "$(want_slurm_layout n1 29500 4 n1:0:0:0:2 n1:0:1:1:2 n0:1:2:0:2 n0:1:3:1:2)"
slurm_stderr

expect_eq "no process left on any node (but the Slurm daemons)" "$(slurm_leftovers)" ""
