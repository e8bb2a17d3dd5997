#!/usr/bin/env bash
# srun -m arbitrary on a real Slurm (tests/slurm.sh), issue 22: task i runs
# on the i-th host of SLURM_HOSTFILE (or of srun -w's list), so rank 0 can
# be on n1 while the step's node list, sorted, starts with n0.  Each layout
# is checked three ways (what Slurm did, what amlrun exports, what
# amldist_init derives: slurm_step), and a gloo DDP job must run on it:
# with MASTER_ADDR=n0 it waited for a rank 0 that was never there.
# amldist-test: slow (one of the longest: tests/run.sh starts it early)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/slurm.sh"
SLURM_TIMEOUT=120
slurm_setup
with_torch=1
have_torch torch.distributed || with_torch=0

printf 'n1\nn0\nn0\n' >"$TEST_TMP/hosts"
for mpi in none pmi2 pmix; do
    if [ ! -e "$SLURM_PLUGINS/mpi_$mpi.so" ]; then
        skip "srun --mpi=$mpi -m arbitrary" "no mpi/$mpi plugin in $SLURM_PLUGINS"
        continue
    fi
    # srun reads SLURM_HOSTFILE from its own environment.
    SLURM_HOSTFILE=$TEST_TMP/hosts slurm_step \
        "SLURM_HOSTFILE=n1,n0,n0 srun --mpi=$mpi -m arbitrary -n3" "n1 n0 n0" \
        --mpi=$mpi -m arbitrary -n3 CMD
    if [ "$mpi" = none ] && [ "$with_torch" = 1 ]; then
        SLURM_HOSTFILE=$TEST_TMP/hosts slurm_ddp \
            "DDP: SLURM_HOSTFILE=n1,n0,n0 srun -m arbitrary -n3 amlrun train.py" \
            -m arbitrary -n3 CMD
    fi
done
# The layout from srun -w's list: no SLURM_HOSTFILE reaches the tasks.
slurm_step "srun -m arbitrary -w n1,n0,n1,n0 -n4" "n1 n0 n1 n0" -m arbitrary -w n1,n0,n1,n0 -n4 CMD
[ "$with_torch" = 1 ] &&
    slurm_ddp "DDP: srun --mpi=pmi2 -m arbitrary -w n1,n0,n1,n0 -n4 amlrun train.py" \
        --mpi=pmi2 -m arbitrary -w n1,n0,n1,n0 -n4 CMD
# Neighbours: rank 0 on the first node after all; one node.
slurm_step "srun -m arbitrary -w n0,n1,n1 -n3" "n0 n1 n1" -m arbitrary -w n0,n1,n1 -n3 CMD
slurm_step "srun -m arbitrary -w n1,n1 -n2 (one node)" "n1 n1" -m arbitrary -w n1,n1 -n2 CMD
# One amlrun per node, started by srun -m arbitrary: amlrun's node order
# is Slurm's task order, so its ranks 0 and 1 run on n1, the master.
out=$(slurm_on n0 $T srun -m arbitrary -w n1,n0 -n2 "$AMLRUN" --nproc-per-node 2 "$REPORT" 2>"$TEST_TMP/err")
expect_eq "srun -m arbitrary -w n1,n0 amlrun --nproc-per-node 2: layout" "$(by_rank <<<"$out")" \
    "$(want_slurm_layout n1 29500 4 n1:0:0:0:2 n1:0:1:1:2 n0:1:2:0:2 n0:1:3:1:2)"
slurm_stderr

expect_eq "no process left on any node (but the Slurm daemons)" "$(slurm_leftovers)" ""
