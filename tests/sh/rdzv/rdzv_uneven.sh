#!/usr/bin/env bash
# Nodes with different worker counts (issue 12): the agents learn every
# node's count from the control plane and number the workers as torchrun
# does (RANK = the workers of the lower nodes + LOCAL_RANK, WORLD_SIZE = all
# of them).  With the c10d rendezvous (nodes in order of arrival) side by
# side with real torchrun on the same nodes, a real PyTorch DDP job (gloo,
# CPU) with 1 and 2 workers whose replicas agree, and the static rendezvous
# (--node-rank, --master-addr/--master-port), which refused such jobs before.
# As rdzv_uneven@etcd the rendezvous cases on etcd (not torchrun's, the
# static ones or DDP: c10d's program has those).
# amldist-test: slow (one of the longest: tests/run.sh starts it early)
# amldist-test: etcd
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
. "$TOP/tests/amlrun/rdzv.sh"
MULTINODE_TIMEOUT=120
rz_setup 3
EP=$(node_addr n0)
HAVE_TORCH=0
have_torch torch.distributed.run && HAVE_TORCH=1

# in_order PORT NNODES NODE:COUNT...: one amlrun per node, the same line but
# --nproc-per-node, started one after the other so that they arrive in this
# order (the next starts once the last one has reached the host; on etcd,
# once it has joined).
in_order() {
    local port=$1 nn=$2 spec node k=0
    shift 2
    for spec in "$@"; do
        node=${spec%%:*} k=$((k + 1))
        rz_start "$node" --rdzv-backend c10d --rdzv-endpoint "$EP:$port" --nnodes "$nn" \
            --nproc-per-node "${spec#*:}" "$RZW"
        if [ "$RZ_BACKEND" = etcd ]; then rz_wait_joined "$k"
        elif [ "$node" = n0 ]; then rz_wait_listen n0 "$port"
        else rz_wait_conn "$node" "$port" && sleep 0.2; fi
    done
    rz_wait
}

# The records as "host R/W local L/LW node G/GW", the way tr.sh prints.
short() {
    rz_layout | sed -E 's|^(n[0-9]) rank=([0-9/]+) local=([0-9/]+) node=[0-9]+ group=([0-9/]+) .*|\1 \2 local \3 node \4|'
}

# torchrun_side NAME PORT NODE:COUNT...: real torchrun (c10d, the same
# endpoint) on the same nodes with the same counts; its workers' lines
# must be amlrun's (short).
torchrun_side() {
    local name=$1 port=$2 spec
    shift 2
    if [ "$RZ_BACKEND" = etcd ]; then
        skip "$name: torchrun side by side" "c10d's alone: torchrun's c10d"
        return
    fi
    if [ $HAVE_TORCH = 0 ]; then
        skip "$name: torchrun side by side" "$TORCH_PY cannot import torch.distributed.run"
        return
    fi
    printf '#!/bin/sh\necho "$(hostname) $RANK/$WORLD_SIZE local $LOCAL_RANK/$LOCAL_WORLD_SIZE node $GROUP_RANK/$GROUP_WORLD_SIZE"\n' \
        >"$TEST_TMP/tr.sh"
    chmod +x "$TEST_TMP/tr.sh"
    local mine pids=()
    mine=$(short)
    for spec in "$@"; do
        on "${spec%%:*}" $T "$TORCH_PY" "$TOP/bench/torchrun-wrapper.py" --nnodes $# \
            --rdzv_backend c10d --rdzv_endpoint "$EP:$port" --nproc_per_node "${spec#*:}" \
            --no_python "$TEST_TMP/tr.sh" >"$TEST_TMP/tr.${spec%%:*}" 2>&1 &
        pids+=($!)
    done
    wait "${pids[@]}"
    # torchrun's c10d orders the nodes by host name: here, as they arrived.
    expect_eq "$name: the same ranks as torchrun's on the same nodes" \
        "$(cat "$TEST_TMP"/tr.n* | grep -E '^n[0-9] ' | sort -t' ' -k2,2n)" "$mine"
    no_leftovers "$name: torchrun"
}

rz_case c10d-123
in_order "$PORT" 3 n0:1 n1:2 n2:3
rz_expect "$RZ_BACKEND, 1, 2 and 3 workers: every agent exits 0" "$(rz_rcs n0 n1 n2)" "n0=0 n1=0 n2=0"
expect_eq "$RZ_BACKEND, 1, 2 and 3 workers: ranks 0 | 1 2 | 3 4 5 of 6" "$(rz_layout)" \
    "$(rz_want 0 n0:1 n1:2 n2:3)"
rz_check_layout "$RZ_BACKEND, 1, 2 and 3 workers" 3 0
no_leftovers "$RZ_BACKEND, 1, 2 and 3 workers"

# (on etcd, nothing the first has not had, but torchrun's side: c10d's)
if rz_c10d_only "3, 1 and 2 workers" "the case above has the numbering"; then
rz_case c10d-321
in_order $((PORT + 10)) 3 n0:3 n1:1 n2:2
rz_expect "$RZ_BACKEND, 3, 1 and 2 workers: every agent exits 0" "$(rz_rcs n0 n1 n2)" "n0=0 n1=0 n2=0"
expect_eq "$RZ_BACKEND, 3, 1 and 2 workers: ranks 0 1 2 | 3 | 4 5 of 6" "$(rz_layout)" \
    "$(rz_want 0 n0:3 n1:1 n2:2)"
no_leftovers "$RZ_BACKEND, 3, 1 and 2 workers"
torchrun_side "$RZ_BACKEND, 3, 1 and 2 workers" $((PORT + 11)) n0:3 n1:1 n2:2
fi

# (the static rendezvous has no backend: c10d's program alone)
if [ "$RZ_BACKEND" = c10d ]; then
# Static rendezvous: the node ranks are given, MASTER_ADDR/PORT stay the
# given ones (the agents meet at the port above).
static() {
    local port=$1 n0c=$2 n1c=$3
    rz_start n0 --nnodes 2 --node-rank 0 --master-addr n0 --master-port "$port" \
        --nproc-per-node "$n0c" "$RZW"
    rz_start n1 --nnodes 2 --node-rank 1 --master-addr n0 --master-port "$port" \
        --nproc-per-node "$n1c" "$RZW"
    rz_wait
}
for counts in "1 2" "2 1"; do
    set -- $counts
    rz_case "static-$1$2"
    static $((PORT + 20 + 4 * $1)) "$1" "$2"
    name="static (--node-rank), $1 and $2 workers"
    rz_expect "$name: both exit 0" "$(rz_rcs n0 n1)" "n0=0 n1=0"
    expect_eq "$name: torchrun's numbering" "$(rz_layout)" "$(rz_want 0 n0:"$1" n1:"$2")"
    expect_eq "$name: MASTER_ADDR:PORT as given" \
        "$(rz_reports | awk '{ print $11, $12 }' | sort -u)" "addr=n0 port=$((PORT + 20 + 4 * $1))"
    no_leftovers "$name"
done

# The static rendezvous with node 1 started first, node 0 late.
rz_case static-late
rsts=$(rz_rsts n0)
rz_start n1 --nnodes 2 --node-rank 1 --master-addr n0 --master-port $((PORT + 33)) \
    --nproc-per-node 2 "$RZW"
rz_wait_refused n0 "$rsts" || fail "static, node 0 late: node 1 tries n0 first"
rz_start n0 --nnodes 2 --node-rank 0 --master-addr n0 --master-port $((PORT + 33)) \
    --nproc-per-node 1 "$RZW"
rz_wait
rz_expect "static, node 0 late: both exit 0" "$(rz_rcs n0 n1)" "n0=0 n1=0"
expect_eq "static, node 0 late: torchrun's numbering" "$(rz_layout)" "$(rz_want 0 n0:1 n1:2)"
no_leftovers "static, node 0 late"
else
    skip "static (--node-rank), uneven counts" "c10d's alone: the static rendezvous has no backend"
fi

# Under mpirun, one amlrun per node (1 worker on n0, 2 on n1), c10d at n0:
# mpirun's rank orders the nodes, also when its rank 0 is on n1 (mpirun
# started there, --host n1,n0); MASTER_ADDR is then n1's address.
cat >"$TEST_TMP/pernode.sh" <<PERNODE
#!/bin/sh
n=2; [ "\$(hostname)" = n0 ] && n=1
exec "$AMLRUN" \$RDZV --nnodes 2 --nproc-per-node \$n "$RZW"
PERNODE
chmod +x "$TEST_TMP/pernode.sh"
# (on etcd, from n1 alone: mpirun's order against the arrival's)
firsts="n0 n1"
[ "$RZ_BACKEND" = etcd ] && firsts=n1
for first in $firsts; do
    name="mpirun per node from $first (--host $first,...), 1 and 2 workers"
    rz_case "mpirun-$first"
    hosts=n0,n1 want=(n0:1 n1:2)
    [ "$first" = n1 ] && hosts=n1,n0 want=(n1:2 n0:1)
    rc=0
    rz_argv --rdzv-backend c10d --rdzv-endpoint "$EP:$((PORT + 50 + ${first#n}))"
    on "$first" $T $MPIRUN -x RZ_DIR -x RDZV="${RZ_ARGV[*]}" --host "$hosts" \
        --npernode 1 --bind-to none "$TEST_TMP/pernode.sh" >"$RZ_DIR/mpirun.out" 2>&1 || rc=$?
    expect_eq "$name: mpirun exits 0" "$rc" 0
    [ "$rc" = 0 ] || tail -n 20 "$RZ_DIR/mpirun.out" | sed 's/^/#   /'
    expect_eq "$name: mpirun's rank 0 ($first) is node 0, torchrun's numbering" \
        "$(rz_layout)" "$(rz_want 0 "${want[@]}")"
    expect_eq "$name: MASTER_ADDR is node 0's ($first) address" \
        "$(rz_reports | field addr | sort -u)" "$(node_addr "$first")"
    no_leftovers "$name"
done

# A real DDP job, 1 worker on n0 and 2 on n1, the same line but the count
# (c10d: the static numbering is the same function, checked above).
if [ "$RZ_BACKEND" = etcd ]; then
    skip "DDP, 1 and 2 workers" "c10d's alone: the layout is the cases' above, the rest torch's"
elif [ $HAVE_TORCH = 1 ]; then
    DDP=$TOP/tests/amlrun/ddp_replicas.py
    # ddp NAME PORT
    ddp() {
        local name=$1 port=$2 node
        rz_case ddp-c10d
        for node in n0 n1; do
            rz_start "$node" --nnodes 2 --rdzv-backend c10d --rdzv-endpoint "$EP:$port" \
                --nproc-per-node $((${node#n} + 1)) --python "$TORCH_PY" "$DDP"
        done
        rz_wait
        rz_expect "$name: both exit 0" "$(rz_rcs n0 n1)" "n0=0 n1=0"
        expect_eq "$name: the replicas agree" \
            "$(cat "$RZ_DIR"/n*.out | grep -E '^n[0-9] rank=' | sort -t= -k2,2n)" \
            "$(printf 'n0 rank=0/3 node=0 agree=True trained=True\nn1 rank=1/3 node=1 agree=True trained=True\nn1 rank=2/3 node=1 agree=True trained=True')"
        no_leftovers "$name"
    }
    ddp "DDP, c10d, 1 and 2 workers" $((PORT + 30))
else
    skip "DDP with 1 and 2 workers" "$TORCH_PY cannot import torch"
fi
