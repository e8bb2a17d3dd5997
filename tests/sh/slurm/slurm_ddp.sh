#!/usr/bin/env bash
# A real PyTorch DDP job (gloo, CPU, init_method env://) across the two
# nodes of a real Slurm (tests/slurm.sh): srun per process
# (`srun --mpi=pmi2 ... amlrun train.py`, the site default that used to
# fail) and head-node mode (`salloc -N2 amlrun --launcher slurm
# --nproc-per-node 2`).  Each replica trains a few steps on its own data;
# then all compare their parameters: equal everywhere, moved from the start.
# One worker a node: slurm_layout.sh checks both ways' layouts at 2 x 2
# with cheap workers; what DDP adds is that torch takes them across nodes
# (a second of CPU a worker).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/slurm.sh"
if ! have_torch torch.distributed; then
    skip "Slurm DDP" "$TORCH_PY cannot import torch"
    exit 0
fi
SLURM_TIMEOUT=120
slurm_setup

# Each rank writes its line to $DDP_OUT.<rank>: srun's forwarding may split
# a line of one rank.
DDP=$TOP/tests/amlrun/ddp_replicas.py

# ddp_ok NAME DIR HOST... (hosts of ranks 0..N-1).
ddp_ok() {
    local name=$1 dir=$2 want="" r=0 host
    shift 2
    for host in "$@"; do
        want+="$host rank=$r/$# node=${host#n} agree=True trained=True"$'\n'
        r=$((r + 1))
    done
    local got
    got=$(cat "$dir"/rank.* 2>/dev/null | sort -t= -k2,2n)
    if [ "$got" = "${want%$'\n'}" ]; then ok "$name"
    else fail "$name"; diag "got: $got"; diag "stderr: $(tail -c 1500 "$TEST_TMP/err")"; fi
}

mkdir -p "$TEST_TMP/pp" "$TEST_TMP/hn"
t0=$(date +%s)
DDP_OUT=$TEST_TMP/pp/rank slurm_on n0 $T srun --mpi=pmi2 -N2 --ntasks-per-node 1 --kill-on-bad-exit=1 \
    "$AMLRUN" --python "$TORCH_PY" "$DDP" >/dev/null 2>"$TEST_TMP/err"
diag "srun per process: status $? after $(($(date +%s) - t0)) s"
ddp_ok "DDP across Slurm nodes: srun --mpi=pmi2 --ntasks-per-node 1 amlrun train.py" \
    "$TEST_TMP/pp" n0 n1

t0=$(date +%s)
DDP_OUT=$TEST_TMP/hn/rank slurm_on n0 $T salloc -N2 "$AMLRUN" --launcher slurm --nproc-per-node 1 \
    --python "$TORCH_PY" "$DDP" >/dev/null 2>"$TEST_TMP/err"
diag "head-node: status $? after $(($(date +%s) - t0)) s"
ddp_ok "DDP across Slurm nodes: salloc -N2 amlrun --launcher slurm --nproc-per-node 1 train.py" \
    "$TEST_TMP/hn" n0 n1

left=""
for _ in $(seq 50); do left=$(slurm_leftovers); [ -z "$left" ] && break; sleep 0.1; done
expect_eq "no process left on any node (but the Slurm daemons)" "$left" ""
