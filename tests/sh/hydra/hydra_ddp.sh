#!/usr/bin/env bash
# A real PyTorch DDP job (gloo, CPU, init_method env://) under MPICH 4's
# mpiexec.hydra: per process on this host, and across two nodes of the
# namespace cluster per process (round robin, -ppn 1: the node rank comes
# from the Hydra proxy) and per node.  Hydra names no host of rank 0, so the
# multi-node runs give MASTER_ADDR with -genv, as a user must.  All replicas
# must end with equal parameters that moved from the start.  Two ranks in
# each run: hydra_layout.sh checks the layout of these runs at 4 ranks
# (round robin's wrap, two workers a node) with cheap workers; what DDP
# adds is that torch takes the variables (a second of CPU a worker).
. "$(dirname "$0")/../../lib.sh"
stdin_without_end # mpiexec.hydra (tests/lib.sh)
if ! have mpiexec.hydra; then
    skip "hydra DDP" "mpiexec.hydra not installed (Debian package mpich)"
    exit 0
fi
if ! have_torch torch.distributed; then
    skip "hydra DDP" "$TORCH_PY cannot import torch"
    exit 0
fi

DDP=$TOP/tests/amlrun/ddp_replicas.py

# Hydra's output forwarding joins the lines of ranks: each rank writes its
# line into a file of its own (the nodes share this file system).
# ddp_ok NAME OUTPUT WORLD HOST... (hosts of ranks 0..WORLD-1; "h" = any).
ddp_ok() {
    local name=$1 out=$2 world=$3 want="" r=0 host node
    shift 3
    for host in "$@"; do
        node=${host#n}; [ "$host" = h ] && node=0
        want+="$host rank=$r/$world node=$node agree=True trained=True"$'\n'
        r=$((r + 1))
    done
    local got
    got=$(grep -E ' rank=[0-9]+/' <<<"$out" | sed "s/^$(hostname) /h /" | sort -t= -k2,2n)
    if [ "$got" = "${want%$'\n'}" ]; then ok "$name"
    else fail "$name"; diag "got: $out"; fi
}

PORT=$((20000 + RANDOM % 20000))
timeout -k 5 120 mpiexec.hydra -n 2 -genv MASTER_PORT "$PORT" -genv DDP_OUT "$TEST_TMP/one" \
    "$AMLRUN" --python "$TORCH_PY" "$DDP" >"$TEST_TMP/log" 2>&1
out=$(cat "$TEST_TMP"/one.* 2>/dev/null; cat "$TEST_TMP/log")
ddp_ok "DDP: mpiexec.hydra -n 2 amlrun (one host)" "$out" 2 h h

. "$TOP/tests/multinode.sh"
MULTINODE_TIMEOUT=120
multinode_setup 2
HY="mpiexec.hydra -launcher ssh -launcher-exec $TOP/scripts/ompi-rsh-agent -hosts n0,n1"
M="-genv MASTER_ADDR $(node_addr n0) -genv MASTER_PORT $PORT"
on n0 $T $HY $M -genv DDP_OUT "$TEST_TMP/pp" -n 2 -ppn 1 "$AMLRUN" --python "$TORCH_PY" "$DDP" >"$TEST_TMP/log" 2>&1
out=$(cat "$TEST_TMP"/pp.* 2>/dev/null; cat "$TEST_TMP/log")
ddp_ok "DDP across nodes: mpiexec.hydra -n 2 -ppn 1 amlrun (per process, round robin)" \
    "$out" 2 n0 n1
on n0 $T $HY $M -genv DDP_OUT "$TEST_TMP/pn" -n 2 -ppn 1 "$AMLRUN" --nproc-per-node 1 \
    --python "$TORCH_PY" "$DDP" >"$TEST_TMP/log" 2>&1
out=$(cat "$TEST_TMP"/pn.* 2>/dev/null; cat "$TEST_TMP/log")
ddp_ok "DDP across nodes: mpiexec.hydra -n 2 -ppn 1 amlrun --nproc-per-node 1 (per node)" \
    "$out" 2 n0 n1

expect_eq "no process left on any node" "$(leftovers)" ""
