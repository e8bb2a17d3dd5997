#!/usr/bin/env bash
# Real PyTorch DDP (gloo, CPU) across the two nodes of a real Slurm
# (tests/slurm.sh) with srun starting python itself: the tasks have only
# SLURM_* variables (and PMI_* or PMIX_* with --mpi=pmi2 or pmix), and
# amldist.export() gives init_process_group("env://") everything, the
# master being the step's first node and the port torchrun's default.
# DDP itself under --mpi=none; under pmi2 and pmix the same layout and
# environment without PyTorch (python/tests/export_env.py: eight workers
# importing torch fewer, a second of CPU each, for what torch would only
# read the same way).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/slurm.sh"
. "$TOP/tests/python.sh"
py_setup
if ! py_has_torch; then
    skip "Slurm DDP with amldist.export()" "$TORCH_PY cannot import torch"; exit 0
fi
SLURM_TIMEOUT=120
slurm_setup
DDP=$TOP/python/tests/ddp_export.py

# ddp_ok NAME DIR LAUNCHER: ranks 0..3, two on each node, block by block.
ddp_ok() {
    local name=$1 dir=$2 launcher=$3 want="" r host got
    for r in 0 1 2 3; do
        host=n$((r / 2))
        want+="$host rank=$r/4 local=$((r % 2))/2 node=$((r / 2)) launcher=$launcher canonical=False"
        want+=" agree=True trained=True binding=plan"$'\n'
    done
    got=$(cat "$dir"/rank.* 2>/dev/null | sort -t= -k2,2n | sed 's/ gpu=.*//')
    if [ "$got" = "${want%$'\n'}" ]; then ok "$name"
    else fail "$name"; diag "got: $got"; diag "want: $want"; sed 's/^/# /' "$dir.err" | tail -n 20; fi
}

# env_ok NAME DIR LAUNCHER: export_env.py's lines, ranks 0..3 as above,
# the master the step's first node (n0, by name or address).
env_ok() {
    local name=$1 dir=$2 launcher=$3 want="" r host got master
    master=$(sed -n 's/^n0 rank=0\/4 .* master=\([^ :]*\):.*/\1/p' "$dir/rank.0" 2>/dev/null)
    [ "$master" = n0 ] || [ "$master" = "$(node_addr n0)" ] || master="n0 (got '$master')"
    for r in 0 1 2 3; do
        host=n$((r / 2))
        want+="$host rank=$r/4 local=$((r % 2))/2 node=$((r / 2)) launcher=$launcher canonical=False"
        want+=" env=$r/4 local=$((r % 2))/2 master=$master:29500 binding=plan"$'\n'
    done
    got=$(cat "$dir"/rank.* 2>/dev/null | sort -t= -k2,2n)
    if [ "$got" = "${want%$'\n'}" ]; then ok "$name"
    else fail "$name"; diag "got: $got"; diag "want: $want"; sed 's/^/# /' "$dir.err" | tail -n 20; fi
}

for mpi in none pmi2 pmix; do
    d=$TEST_TMP/$mpi; mkdir -p "$d"
    t0=$(date +%s)
    prog=$DDP
    [ $mpi = none ] || prog=$TOP/python/tests/export_env.py
    DDP_OUT=$d/rank slurm_on n0 $T srun --mpi=$mpi -N2 --ntasks-per-node 2 --kill-on-bad-exit=1 \
        "$TORCH_PY" "$prog" >/dev/null 2>"$d.err"
    rc=$?
    diag "srun --mpi=$mpi: status $rc after $(($(date +%s) - t0)) s"
    expect_eq "srun --mpi=$mpi -N2 --ntasks-per-node 2 python train.py: exit 0" "$rc" 0
    # With pmi2 the PMI variables lead (the "mpich" reader), with pmix the
    # PMIx server; Slurm's fill in what they lack (amldist-env(7)).
    launcher=slurm
    [ $mpi = pmi2 ] && launcher=mpich
    [ $mpi = pmix ] && launcher=pmix
    if [ $mpi = none ]; then
        ddp_ok "srun --mpi=$mpi: DDP across nodes after amldist.export() (launcher $launcher)" "$d" "$launcher"
    else
        env_ok "srun --mpi=$mpi: amldist.export() across nodes sets what env:// reads (launcher $launcher)" "$d" "$launcher"
    fi
done

# A neighbour: a bad value beside Slurm's is the library's message.
# (srun's own "task 0: Exited" line may come before or after it.)
err=$(slurm_on n0 $T srun -N1 -n1 --export=ALL,MASTER_PORT=65536 "$TORCH_PY" -c \
    'import amldist; amldist.export()' 2>&1 | grep '^amldist\.')
expect_eq "srun with MASTER_PORT=65536: amldist.LayoutError naming it" "$err" \
    "amldist.LayoutError: MASTER_PORT=65536: out of range (1..65535)"

left=""
for _ in $(seq 50); do left=$(slurm_leftovers); [ -z "$left" ] && break; sleep 0.1; done
expect_eq "no process left on any node (but the Slurm daemons)" "$left" ""
