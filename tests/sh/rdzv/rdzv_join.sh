#!/usr/bin/env bash
# The control plane's rendezvous (issue 12): the same amlrun command line on
# every node of the namespace cluster (--rdzv-backend c10d --rdzv-endpoint
# <n0's address>:PORT --nnodes N, no --node-rank), and the agents find
# their node ranks themselves: the endpoint's node (it hosts the control
# plane) is node 0, the others follow; the workers get torchrun's variables
# for that order, node 0's address and one MASTER_PORT.  2, 3 and 4 nodes,
# the host's agent starting last, the endpoint by name.  As rdzv_join@etcd
# the same jobs meet in etcd (tests/amlrun/rdzv.sh's RZ_BACKEND): node 0 is
# then the decider's node, the first agent's (n1 when it starts first),
# and 3 nodes x 1 and --nnodes 1 are left to c10d's program.
# amldist-test: etcd
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
. "$TOP/tests/amlrun/rdzv.sh"
rz_setup 4
EP=$(node_addr n0)

# job NAME TAG PORT NNODES NPROC NODE...: the same line on each NODE.
job() {
    local name=$1 tag=$2 port=$3 nn=$4 np=$5 node
    shift 5
    rz_case "$tag"
    for node in "$@"; do
        rz_start "$node" --rdzv-backend c10d --rdzv-endpoint "$EP:$port" --nnodes "$nn" \
            --nproc-per-node "$np" "$RZW"
    done
    rz_wait
    rz_expect "$name: every agent exits 0" "$(rz_rcs "$@")" "$(rz_want_rcs 0 "$@")"
    expect_eq "$name: every worker started once" "$(rz_count rep.)" $((${nn##*:} * np))
}

job "2 nodes x 2" two $PORT 2 2 n0 n1
rz_check_layout "2 nodes x 2" 2 0
# (on etcd, the decider's node holds ranks 0,1: either)
first=n0 second=n1
[ "$RZ_BACKEND" = etcd ] && [ "$(rz_node0)" = n1 ] && first=n1 second=n0
expect_eq "2 nodes x 2: $first holds ranks 0,1 and $second ranks 2,3" "$(rz_layout)" \
    "$(rz_want 0 $first:2 $second:2)"
[ "$(rz_count rep.)" = 4 ] || rz_dump
no_leftovers "2 nodes x 2"

# The other node's agent starts first: it waits for the host to listen
# (n0 starts once it has refused n1's first try).  On etcd, n1 holds the
# decider key before n0 starts: it is node 0.
rz_case late-host
if [ "$RZ_BACKEND" = c10d ]; then
    rsts=$(rz_rsts n0)
    rz_start n1 --rdzv-backend c10d --rdzv-endpoint "$EP:$((PORT + 10))" --nnodes 2 \
        --nproc-per-node 1 "$RZW"
    rz_wait_refused n0 "$rsts" || fail "host's agent last: n1 tries n0 first"
    first=n0:1 second=n1:1
else
    rz_start n1 --rdzv-backend c10d --rdzv-endpoint "$EP:$((PORT + 10))" --nnodes 2 \
        --nproc-per-node 1 "$RZW"
    for _ in $(seq 200); do etcd_left | grep -q '/b/lead$' && break; nap 0.05; done
    first=n1:1 second=n0:1
fi
rz_start n0 --rdzv-backend c10d --rdzv-endpoint "$EP:$((PORT + 10))" --nnodes 2 \
    --nproc-per-node 1 "$RZW"
rz_wait
expect_eq "host's agent last: both exit 0" "$(rz_rcs n0 n1)" "n0=0 n1=0"
expect_eq "host's agent last: the host ($RZ_BACKEND: ${first%:*}) is node 0" "$(rz_layout)" \
    "$(rz_want 0 $first $second)"
no_leftovers "host's agent last"

# The endpoint by name, and --rdzv-id on every node (on etcd, the member
# by its node's name).
rz_case byname
for node in n1 n0; do
    rz_start "$node" --rdzv-backend c10d --rdzv-endpoint "n0:$((PORT + 20))" --rdzv-id job42 \
        --nnodes 2 --nproc-per-node 2 "$RZW"
done
rz_wait
expect_eq "endpoint n0:PORT: both exit 0" "$(rz_rcs n0 n1)" "n0=0 n1=0"
rz_check_layout "endpoint n0:PORT" 2 0
no_leftovers "endpoint n0:PORT"

# (on etcd, nothing that 3:3 and 4 nodes below do not have)
if rz_c10d_only "3 nodes x 1" "3:3 and 4 nodes have it"; then
    job "3 nodes x 1" three $((PORT + 30)) 3 1 n0 n1 n2
    rz_check_layout "3 nodes x 1" 3 0
    no_leftovers "3 nodes x 1"
fi

# With the job's secret (issue 21): every connection the channel's.
AMLDIST_JOB_TOKEN=$(job_secret join-secret) \
    job "4 nodes x 2, with a secret" four $((PORT + 40)) 4 2 n0 n1 n2 n3
rz_check_layout "4 nodes x 2, with a secret" 4 0
no_leftovers "4 nodes x 2, with a secret"

# N:N is a fixed size too.
job "--nnodes 3:3" threethree $((PORT + 50)) 3:3 1 n2 n1 n0
rz_check_layout "--nnodes 3:3" 3 0
no_leftovers "--nnodes 3:3"

# Node 0's workers end at once, n1's after 2 s: the host's agent stays for
# the rest of the job, and both exit 0.
rz_case host-first
rz_start n0 --rdzv-backend c10d --rdzv-endpoint "$EP:$((PORT + 60))" --nnodes 2 \
    --nproc-per-node 2 "$RZW"
RZ_RUN=2 rz_start n1 --rdzv-backend c10d --rdzv-endpoint "$EP:$((PORT + 60))" --nnodes 2 \
    --nproc-per-node 2 "$RZW"
rz_wait
rz_expect "node 0's workers done first: both exit 0" "$(rz_rcs n0 n1)" "n0=0 n1=0"
expect_eq "node 0's workers done first: n1's workers ran to their end" "$(rz_count rep.) $(rz_count term.)" "4 0"
# (an agent of node 0 that left first would take the host with it: n1
# would see it lost, and exit 125)
diag "node 0's workers done first: n0's agent ended $((${END[n0]} - ${END[n1]})) ms after n1's"
check "node 0's workers done first: n0's agent waited, n1 never lost the host" \
    sh -c "! grep -q 'was lost' '$RZ_DIR/n1.err'"
no_leftovers "node 0's workers done first"

# One node: --nnodes 1, and 1:2 with nobody else (a round of one after the
# last call).
# (on etcd, 1:2 alone: the one with the last call)
nns="1 1:2"
[ "$RZ_BACKEND" = etcd ] && nns=1:2
for nn in $nns; do
    rz_case "one-${nn/:/-}"
    rz_start n0 --rdzv-backend c10d --rdzv-endpoint "$EP:$((PORT + 70 + ${#nn}))" --nnodes "$nn" \
        --nproc-per-node 2 --rdzv-conf last_call_timeout=0.5 "$RZW"
    rz_wait
    rz_expect "--nnodes $nn, one node: exit 0" "${RC[n0]}" 0
    expect_eq "--nnodes $nn, one node: ranks 0 and 1 of 2" "$(rz_layout)" "$(rz_want 0 n0:2)"
    no_leftovers "--nnodes $nn, one node"
done
