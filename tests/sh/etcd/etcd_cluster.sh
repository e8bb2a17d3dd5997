#!/usr/bin/env bash
# The etcd rendezvous (issue 40) on the namespace cluster: an etcd of three
# members, one in each of the nodes n0, n1 and n2 (tests/etcd.sh's
# etcd_up_nodes, on the nodes' cluster addresses), an amlrun on each node,
# the same line, the endpoint the members' list.  The member every agent
# talks to (the list's first, n0's) is SIGKILLed while the workers run:
# the job does not notice (every agent exits 0, the workers ran once, no
# agent says anything was lost or stopped), nothing is left on any node
# and nothing in etcd.  (etcd_three: the same on loopback.)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
. "$TOP/tests/amlrun/rdzv.sh"
RZ_BACKEND=etcd RZ_ETCD_NODES="n0 n1 n2"
rz_setup 3
EP=$(node_addr n0)
NODES=(n0 n1 n2)

rz_case kill-member
export RZ_RUN=4
for node in "${NODES[@]}"; do
    rz_start "$node" --rdzv-backend c10d --rdzv-endpoint "$EP:$PORT" --nnodes 3 \
        --nproc-per-node 1 --rdzv-conf "$RZ_FAST" "$RZW"
done
name="3 members on 3 nodes, n0's killed mid-job"
if rz_wait_files rep. 3; then
    etcd_kill 0
else
    fail "$name: the job runs on every node"
fi
rz_wait
rz_expect "$name: every agent exits 0" "$(rz_rcs "${NODES[@]}")" "$(rz_want_rcs 0 "${NODES[@]}")"
expect_eq "$name: one round, each worker started once" \
    "$(rz_count rep.) $(rz_reports | grep -c ' restart=0 ')" "3 3"
rz_check_layout "$name" 3 0
check "$name: no agent says anything was lost or stopped" \
    sh -c '! grep -qi "lost\|stopping\|re-forms" "$0"/n*.err' "$RZ_DIR"
no_leftovers "$name"
nap 0.5
ETCD_EP=${ETCD_EP#*,}
expect_eq "$name: nothing left in etcd" "$(etcd_left)" ""
