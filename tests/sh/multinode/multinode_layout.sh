#!/usr/bin/env bash
# Two nodes, two workers each, in every way amlrun is started (issue 6):
# standalone on each node, per-process under mpirun (by slot and by node,
# where the node rank must come from PMIx), per-node under mpirun, head-node
# mode (--hosts, --hostfile), and Azure ML style with AZ_BATCH_MASTER_NODE.
# Every worker reports RANK, LOCAL_RANK, NODE_RANK, WORLD_SIZE, ... and the
# test compares the whole set.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
multinode_setup 2

slot_layout() { want_layout "$1" "$2" n0:0:0:0 n0:0:1:1 n1:1:2:0 n1:1:3:1; }
# Under mpirun the master is mpirun's own address, from OMPI_MCA_orte_hnp_uri
# (rank 0 runs on mpirun's node); the cluster gives node i 10.231.0.1i.
addr_of() { echo "10.231.0.1${1#n}"; }
N0=$(addr_of n0)

# Standalone: one amlrun per node, told its node rank.
on n0 $T "$AMLRUN" --nnodes 2 --node-rank 0 --master-addr n0 --master-port "$PORT" \
    --nproc-per-node 2 "$REPORT" >"$TEST_TMP/s0" 2>&1 &
on n1 $T "$AMLRUN" --nnodes 2 --node_rank 1 --master_addr n0 --master_port "$PORT" \
    --nproc_per_node 2 "$REPORT" >"$TEST_TMP/s1" 2>&1 &
wait
expect_eq "standalone on each node: the whole layout" \
    "$(cat "$TEST_TMP/s0" "$TEST_TMP/s1" | by_rank)" "$(slot_layout n0 "$PORT")"

# Per-process under mpirun, ranks by slot: node rank = rank / 2.
got=$(on n0 $T $MPIRUN --host n0:2,n1:2 "$AMLRUN" "$REPORT" | by_rank)
expect_eq "mpirun --host n0:2,n1:2 amlrun: layout by slot" "$got" "$(slot_layout "$N0" 29500)"

# ... and by node: ranks alternate between nodes, so neither rank / local
# size nor OMPI_COMM_WORLD_NODE_RANK (a local index) gives the node: the
# number of the rank's Open MPI daemon does (no PMIx connection, which would
# break a later MPI_Init).
got=$(on n0 $T $MPIRUN --host n0:2,n1:2 --map-by node "$AMLRUN" "$REPORT" | by_rank)
expect_eq "mpirun --map-by node amlrun: node rank from the daemon number" "$got" \
    "$(want_layout "$N0" 29500 n0:0:0:0 n1:1:1:0 n0:0:2:1 n1:1:3:1)"
got=$(on n0 $T $MPIRUN --host n0:2,n1:2 --map-by node "$BUILD/examples/hello" --explain |
      grep '^EXPLAIN_NODE_RANK=' | sed 's/ (.*//' | sort | uniq -c | awk '{print $1, $2, $3, $4}' | tr '\n' ';')
expect_eq "mpirun --map-by node: the node rank is explained by the daemon number" "$got" \
    "2 EXPLAIN_NODE_RANK=derived: OMPI_MCA_orte_local_daemon_uri is;2 EXPLAIN_NODE_RANK=derived: daemon 1;"

# Per-node under mpirun: one amlrun per node starts two workers.
got=$(on n0 $T $MPIRUN --host n0,n1 --npernode 1 "$AMLRUN" --nproc-per-node 2 "$REPORT" | by_rank)
expect_eq "mpirun --npernode 1 amlrun --nproc-per-node 2: layout" "$got" "$(slot_layout "$N0" 29500)"

# Head-node mode: amlrun on n0 builds the mpirun command itself.
got=$(on n0 $T "$AMLRUN" --hosts n0:2,n1:2 --master-port "$PORT" "$REPORT" | by_rank)
expect_eq "head-node --hosts n0:2,n1:2: layout" "$got" "$(slot_layout "$N0" "$PORT")"
printf '# two nodes\nn0 slots=2\n\nn1 slots=2  # second\n' >"$TEST_TMP/hostfile"
got=$(on n0 $T "$AMLRUN" --hostfile "$TEST_TMP/hostfile" "$REPORT" | by_rank)
expect_eq "head-node --hostfile (slots=2): layout" "$got" "$(slot_layout "$N0" 29500)"
# mpirun puts rank 0 on its own node whatever the order of --host: the
# master must follow rank 0, not the first host named.
got=$(on n0 $T "$AMLRUN" --hosts n1,n0 --nproc-per-node 2 "$REPORT" | by_rank)
first=${got%% *}
other=n1; [ "$first" = n1 ] && other=n0
expect_eq "head-node --hosts n1,n0: the master is rank 0's node" "$got" \
    "$(want_layout "$(addr_of "$first")" 29500 "$first:0:0:0" "$first:0:1:1" "$other:1:2:0" "$other:1:3:1")"
# Variables reach the other node only through -x: NCCL_*, AMLRUN_*... do.
got=$(NCCL_SOCKET_IFNAME=eth0 H5_NOT_PASSED=1 on n0 $T "$AMLRUN" --hosts n0,n1 --no-python -- \
      sh -c 'echo "$(hostname) ${NCCL_SOCKET_IFNAME:-unset} ${H5_NOT_PASSED:-unset}"' | sort | tr '\n' ';')
expect_eq "head-node: NCCL_* reaches every node, an unrelated variable stays home" "$got" \
    "n0 eth0 1;n1 eth0 unset;"
# The command it runs, exactly.
got=$(on n0 env -i PATH=/usr/bin:/bin NCCL_DEBUG=INFO "$AMLRUN" --hosts n0:2,n1:2 --dry-run --log-dir "/tmp/x y" -- ./train.py --lr 0.1)
expect_eq "head-node --dry-run prints the mpirun command" "$got" \
    "mpirun -np 2 --host n0:1,n1:1 --npernode 1 --bind-to none -x NCCL_DEBUG -x PATH $AMLRUN --log-dir '/tmp/x y' --nnodes 2 --nproc-per-node 2 -- ./train.py --lr 0.1"

# Azure ML: every node has AZ_BATCH_MASTER_NODE=<node 0 address>:6105 (the
# platform sets it; here -x plays the platform); the master comes from it.
export AZ_BATCH_MASTER_NODE=10.231.0.10:6105
got=$(on n0 $T $MPIRUN --host n0:2,n1:2 -x AZ_BATCH_MASTER_NODE "$AMLRUN" "$REPORT" | by_rank)
expect_eq "Azure ML per-process: master from AZ_BATCH_MASTER_NODE" "$got" "$(slot_layout 10.231.0.10 6105)"
got=$(on n0 $T $MPIRUN --host n0,n1 --npernode 1 -x AZ_BATCH_MASTER_NODE "$AMLRUN" --nproc-per-node 2 "$REPORT" | by_rank)
expect_eq "Azure ML per-node: master from AZ_BATCH_MASTER_NODE" "$got" "$(slot_layout 10.231.0.10 6105)"
unset AZ_BATCH_MASTER_NODE

expect_eq "no process left on any node" "$(leftovers)" ""
