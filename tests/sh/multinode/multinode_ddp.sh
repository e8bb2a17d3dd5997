#!/usr/bin/env bash
# A real PyTorch DDP job (gloo, CPU, init_method env://) across two nodes of
# the namespace cluster: standalone amlrun on each node, mpirun amlrun per
# process (ranks by node) and per node.  Each replica trains a few steps on
# its own data, then all replicas compare their parameters: they must be
# equal everywhere and differ from the start.  One worker a node in each
# mode: multinode_layout.sh checks every worker's layout in these modes at
# 2 x 2 with cheap workers, and multinode_debian_hosts.sh and
# multinode_kubeflow.sh run DDP at 2 x 2; what DDP adds here is that torch
# takes each mode's variables across nodes (a second of CPU a worker).
# amldist-test: slow (one of the longest: tests/run.sh starts it early)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
if ! have_torch torch.distributed; then
    skip "multi-node DDP" "$TORCH_PY cannot import torch"
    exit 0
fi
MULTINODE_TIMEOUT=120
multinode_setup 2

DDP=$TOP/tests/amlrun/ddp_replicas.py

# ddp_ok NAME OUTPUT HOST... (hosts of ranks 0..N-1).
ddp_ok() {
    local name=$1 out=$2 want="" r=0 host node
    shift 2
    for host in "$@"; do
        node=${host#n}
        want+="$host rank=$r/$# node=$node agree=True trained=True"$'\n'
        r=$((r + 1))
    done
    local got
    got=$(grep -E '^n[0-9] rank=' <<<"$out" | sort -t= -k2,2n)
    if [ "$got" = "${want%$'\n'}" ]; then ok "$name"
    else fail "$name"; diag "got: $out"; fi
}

on n0 $T "$AMLRUN" --nnodes 2 --node-rank 0 --master-addr n0 --master-port "$PORT" \
    --nproc-per-node 1 --python "$TORCH_PY" "$DDP" >"$TEST_TMP/d0" 2>&1 &
on n1 $T "$AMLRUN" --nnodes 2 --node-rank 1 --master-addr n0 --master-port "$PORT" \
    --nproc-per-node 1 --python "$TORCH_PY" "$DDP" >"$TEST_TMP/d1" 2>&1
wait
ddp_ok "DDP across nodes: standalone amlrun on each node" \
    "$(cat "$TEST_TMP/d0" "$TEST_TMP/d1")" n0 n1

# mpirun's own forwarding joins lines of two ranks (python -u writes the text
# and the newline apart): the ranks' output is read from per-rank files,
# which every node writes into this shared directory.
# mpirun_ddp NAME TAG HOSTS MPIRUN-ARGS...: run and check, files under $TAG.
mpirun_ddp() {
    local name=$1 tag=$2 hosts=$3
    shift 3
    on n0 $T $MPIRUN --output-filename "$TEST_TMP/$tag" "$@" >"$TEST_TMP/$tag.console" 2>&1
    # shellcheck disable=SC2086
    ddp_ok "$name" "$(cat "$TEST_TMP/$tag"/1/rank.*/stdout 2>/dev/null)" $hosts
}
mpirun_ddp "DDP across nodes: mpirun --map-by node amlrun (per process)" mo "n0 n1" \
    --host n0:1,n1:1 --map-by node "$AMLRUN" --python "$TORCH_PY" "$DDP"
mpirun_ddp "DDP across nodes: mpirun --npernode 1 amlrun --nproc-per-node 1" mn "n0 n1" \
    --host n0,n1 --npernode 1 --bind-to none "$AMLRUN" --nproc-per-node 1 \
    --python "$TORCH_PY" "$DDP"

expect_eq "no process left on any node" "$(leftovers)" ""
