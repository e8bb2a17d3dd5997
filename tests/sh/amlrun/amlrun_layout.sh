#!/usr/bin/env bash
# amlrun's own layout against its options: a value the launcher does not
# give is never passed on or shown as a number (the library's -993), an
# option may fill in or repeat what the launcher says but not contradict it,
# and layouts too large are usage errors (2) that name the option.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
d=$TEST_TMP/layout
mkdir -p "$d"

# run ENV... -- ARGS...: amlrun in a clean environment (no launcher of the
# test's own), stdout in $d/out, stderr in $d/err, status in $rc
run() {
    local e=()
    while [ "$1" != -- ]; do e+=("$1"); shift; done
    shift
    env -i PATH="$PATH" HOME="$HOME" AMLRUN_PYTHON="$TORCH_PY" "${e[@]}" \
        "$AMLRUN" "$@" >"$d/out" 2>"$d/err"
    rc=$?
}
no_code() { ! grep -q -- '-99[0-9]' "$d/out" "$d/err" "$d"/ran.* 2>/dev/null; }
# a worker that shows what it got (and, given a directory, leaves a file)
printf '#!/bin/sh\nline="$LOCAL_RANK ${NODE_RANK-none} ${GROUP_RANK-none} $*"\n[ -n "${DIR-}" ] && echo "$line" >"$DIR/ran.$RANK"\necho "$line"\n' >"$d/show"
chmod 755 "$d/show"

# --- the launcher gives this amlrun's rank but not where it sits on its node
for e in "RANK=0 WORLD_SIZE=2" "PMI_RANK=0 PMI_SIZE=2"; do
    rm -f "$d"/ran.*
    run $e MASTER_ADDR=127.0.0.1 DIR="$d" -- --nproc-per-node 2 --legacy-launch \
        --no-python "$d/show"
    expect_eq "$e, --nproc-per-node 2: usage error" "$rc" 2
    check "$e: one message naming LOCAL_RANK" \
        test "$(grep -c '^amlrun: ' "$d/err")" = 1 -a "$(grep -c 'LOCAL_RANK' "$d/err")" = 1
    check "$e: no worker started" test ! -e "$d/ran.0"
    check "$e: no -993 anywhere" no_code
    run $e MASTER_ADDR=127.0.0.1 -- --nproc-per-node 2 --dry-run --no-python true
    expect_eq "$e, --dry-run: usage error too" "$rc" 2
    check "$e, --dry-run: no 'node -993'" no_code
done

# --- the local rank given, the node rank still unknown (two amlruns share
#     each node, which one is not said): left out, shown '?'
L="RANK=2 WORLD_SIZE=4 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1"
run $L -- --no-node-check --nproc-per-node 2 --legacy-launch --prefix='%r/%l/%n/%%n:' --no-python "$d/show"
expect_eq "node rank unknown: the job runs" "$rc" 0
expect_eq "node rank unknown: %n is '?', NODE_RANK and GROUP_RANK left out" \
    "$(sort "$d/out")" "$(printf '4/0/?/%%n:0 none none --local_rank=0\n5/1/?/%%n:1 none none --local_rank=1')"
check "node rank unknown: no -993 anywhere" no_code
run $L -- --nproc-per-node 2 --dry-run --no-python true
check "node rank unknown: --dry-run says 'node ?'" grep -q '^rank 5 (local 1, node ?): ' "$d/out"
check "node rank unknown, --dry-run: no -993" no_code

# --- one amlrun alone on its node: its rank is the node index (the rule
#     launch.py's workers get), whether the launcher says "alone" or names
#     the node (Azure ML's PyTorch distribution, one process per node)
for L in "RANK=1 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1" \
         "RANK=1 WORLD_SIZE=2 LOCAL_RANK=0 NODE_RANK=1"; do
    run $L MASTER_ADDR=127.0.0.1 -- --no-node-check --nproc-per-node 2 --legacy-launch \
        --prefix='%r/%l/%n:' --no-python "$d/show"
    expect_eq "$L: node 1, GROUP_RANK 1" "$(sort "$d/out")" \
        "$(printf '2/0/1:0 1 1 --local_rank=0\n3/1/1:1 1 1 --local_rank=1')"
    run $L MASTER_ADDR=127.0.0.1 -- --nproc-per-node 2 --dry-run --no-python true
    check "$L: LOCAL_WORLD_SIZE=2 GROUP_WORLD_SIZE=2 in --dry-run" \
        grep -Eq '^rank 3 \(local 1, node 1\): .*LOCAL_WORLD_SIZE=2 (NODE_RANK=1 )?GROUP_RANK=1 GROUP_WORLD_SIZE=2 ' "$d/out"
done

# --- in place, a launcher that gives LOCAL_RANK but not LOCAL_WORLD_SIZE
#     (Azure ML's PyTorch distribution, per process): the command runs with
#     the launcher's variables, LOCAL_WORLD_SIZE left out as the launcher did
A="RANK=5 WORLD_SIZE=8 LOCAL_RANK=1 NODE_RANK=1 MASTER_ADDR=10.0.0.4 MASTER_PORT=6105"
run $A -- --cpu-bind none --no-python /usr/bin/env
expect_eq "in place, no LOCAL_WORLD_SIZE: runs" "$rc" 0
check "in place, no LOCAL_WORLD_SIZE: RANK LOCAL_RANK NODE_RANK GROUP_RANK passed on" \
    test "$(grep -E '^(RANK|LOCAL_RANK|NODE_RANK|GROUP_RANK|WORLD_SIZE)=' "$d/out" | sort | tr '\n' ' ')" = \
        "GROUP_RANK=1 LOCAL_RANK=1 NODE_RANK=1 RANK=5 WORLD_SIZE=8 "
check "in place, no LOCAL_WORLD_SIZE: none invented" sh -c "! grep -q ^LOCAL_WORLD_SIZE= \"$d/out\""
run RANK=4 WORLD_SIZE=8 LOCAL_RANK=0 NODE_RANK=1 MASTER_ADDR=10.0.0.4 -- --no-python /usr/bin/env
expect_eq "in place, no LOCAL_WORLD_SIZE, default binding: runs" "$rc" 0
check "in place, no LOCAL_WORLD_SIZE, default binding: says why it cannot bind" \
    grep -q 'LOCAL_WORLD_SIZE is not known' "$d/err"
check "in place, no LOCAL_WORLD_SIZE: no -993" no_code

# --- explicit options against the launcher (Slurm: this is node 1 of 2)
S="SLURM_JOB_ID=7 SLURM_STEP_ID=0 SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_LOCALID=0
   SLURM_NODEID=1 SLURM_NNODES=2 SLURM_STEP_TASKS_PER_NODE=1(x2) MASTER_ADDR=127.0.0.1"
# The library's messages name each option as the user gave it (issue 38),
# never the library's num_nodes= / node_rank= / master_addr=.
for opt in "--node-rank 0" "--nnodes 1" "--nnodes 3" "--standalone"; do
    run $S -- $opt --nproc-per-node 2 --dry-run --no-python true
    expect_eq "Slurm node 1 of 2, $opt: usage error" "$rc" 2
    check "Slurm node 1 of 2, $opt: one message" test "$(grep -c '^amlrun: ' "$d/err")" = 1
    check "Slurm node 1 of 2, $opt: in amlrun's words" sh -c '! grep -q "option [a-z_]*=" "$0"' "$d/err"
done
run $S -- --node-rank 0 --nproc-per-node 2 --dry-run --no-python true
check "--node-rank 0 on SLURM_NODEID=1: names both, the option as typed" \
    grep -q "cannot work out this job's layout: --node-rank 0 conflicts with SLURM_NODEID=1" "$d/err"
run $S -- --nnodes=3 --nproc-per-node 2 --dry-run --no-python true
check "--nnodes=3 on 2 Slurm nodes: named as typed" grep -q -- "--nnodes 3 conflicts with SLURM_NNODES=2" "$d/err"
run $S PET_NODE_RANK=0 -- --nproc-per-node 2 --dry-run --no-python true
check "PET_NODE_RANK=0 on SLURM_NODEID=1: named as given" grep -q "PET_NODE_RANK=0 conflicts with SLURM_NODEID=1" "$d/err"
run $S -- --standalone --nproc-per-node 2 --dry-run --no-python true
check "--standalone on 2 Slurm nodes: names --standalone and the node count" \
    grep -q -- "--standalone (one node) conflicts with SLURM_NNODES=2" "$d/err"
run -- --master_addr='a b' --nnodes 2 --node-rank 0 --no-python true
check "--master_addr='a b': refused, named as typed" \
    grep -q -- "--master_addr \"a b\": not a host name or IP address" "$d/err"
# Under real mpirun (one node): the rank's amlrun in place.
if have mpirun; then
    out=$($MPIRUN -np 2 "$AMLRUN" --node_rank=1 --no-python true 2>&1)
    expect_eq "mpirun -np 2 amlrun --node_rank=1: both ranks name --node_rank, not node_rank=" \
        "$(grep -c '^amlrun: cannot work out this job.s layout: --node_rank 1 conflicts with derived: OMPI_COMM_WORLD_LOCAL_SIZE' <<<"$out")" 2
    out=$(PET_NNODES=3 $MPIRUN -np 1 -x PET_NNODES "$AMLRUN" --no-python true 2>&1)
    check "mpirun -x PET_NNODES=3 amlrun: PET_NNODES named" \
        grep -q "^amlrun: .*: PET_NNODES=3 conflicts with OMPI_MCA_orte_num_nodes=1" <<<"$out"
else
    skip "amlrun under mpirun: the options as typed" "no mpirun"
fi
run $S -- --node-rank 1 --nnodes 2 --nproc-per-node 2 --dry-run --no-python true
expect_eq "options that repeat Slurm's values: accepted" "$rc" 0
check "options that repeat Slurm's values: ranks 2,3 on node 1" \
    grep -q "^rank 3 (local 1, node 1): .*NODE_RANK=1 " "$d/out"
# the master is not part of the ranks: an option replaces MASTER_ADDR whole
run $S -- --master-addr 10.9.9.9 --master-port 4242 --nproc-per-node 2 --dry-run --no-python true
check "--master-addr replaces MASTER_ADDR" \
    grep -q "^rank 2 (local 0, node 1): .*MASTER_ADDR=10.9.9.9 MASTER_PORT=4242 " "$d/out"

# --- half of --nnodes/--node-rank with no launcher to give the other: the
#     message names amlrun's options, not the library's (num_nodes,
#     node_rank: issue 38), and says how to give the other half
for dr in "" --dry-run; do
    run -- --nnodes 2 --nproc-per-node 1 $dr --no-python true
    expect_eq "--nnodes 2 alone${dr:+, $dr}: usage error" "$rc" 2
    expect_eq "--nnodes 2 alone${dr:+, $dr}: one line in amlrun's words" "$(cat "$d/err")" \
        "amlrun: --nnodes 2 without --node-rank, and no launcher variable gives this node's rank: give each node's amlrun its --node-rank (0 to 1) and the same --master-addr, or let c10d number the nodes (--rdzv-backend c10d --rdzv-endpoint HOST:PORT); no worker started"
done
run -- --node-rank 1 --nproc-per-node 1 --no-python true
expect_eq "--node-rank 1 alone: usage error" "$rc" 2
expect_eq "--node-rank 1 alone: one line in amlrun's words" "$(cat "$d/err")" \
    "amlrun: --node-rank 1 without --nnodes, and no launcher variable gives the node count: give every node's amlrun the same --nnodes (more than 1); no worker started"
# As the user gave it: torchrun's spelling, its PET_ variable.
run -- --node_rank=1 --nproc-per-node 1 --no-python true
check "--node_rank=1 alone: named as typed" grep -q "^amlrun: --node_rank 1 without --nnodes," "$d/err"
run PET_NNODES=3 -- --nproc-per-node 1 --no-python true
check "PET_NNODES=3 alone: named as given, the range 0 to 2" \
    grep -q "^amlrun: PET_NNODES=3 without --node-rank, .*--node-rank (0 to 2)" "$d/err"
run -- --nnodes 4 --no-python true
check "--nnodes 4 alone, per-process: the range named, no num_nodes" \
    sh -c 'grep -q -- "--node-rank (0 to 3)" "$0" && ! grep -q "num_nodes\|node_rank" "$0"' "$d/err"
# Where a launcher gives the other half, the half given is enough; where the
# launcher's own variables are at fault, that is what is said.
run $S -- --nnodes 2 --nproc-per-node 2 --dry-run --no-python true
expect_eq "--nnodes 2 on Slurm node 1 of 2, no --node-rank: accepted" "$rc" 0
run RANK=0 -- --nnodes 2 --nproc-per-node 1 --dry-run --no-python true
check "--nnodes 2 with RANK but no WORLD_SIZE: the variables named, not --node-rank" \
    sh -c '[ "$1" = 2 ] && grep -q "RANK=0 is set but WORLD_SIZE is not" "$0" && ! grep -q -- "without --node-rank" "$0"' "$d/err" "$rc"

# --- sizes: usage errors that name the option, not a library function
run -- --nnodes 524288 --node-rank 0 --nproc-per-node 4096 --dry-run --no-python true
expect_eq "--nnodes 524288 --nproc-per-node 4096: usage error" "$rc" 2
check "--nnodes 524288 --nproc-per-node 4096: one message naming the option" \
    test "$(cat "$d/err")" = "amlrun: --nproc-per-node 4096 with world size 524288 (--nnodes 524288 (one process per node)): 2147483648 ranks, more than 2147483647"
run -- --nproc-per-node 5000 --dry-run --no-python true
expect_eq "--nproc-per-node 5000: usage error" "$rc" 2
expect_eq "--nproc-per-node 5000: names the option and the range" "$(cat "$d/err")" \
    "amlrun: --nproc-per-node 5000: want a number from 1 to 4096, 'gpu', 'auto' or 'cpu' (see amlrun --help)"
run -- --nproc-per-node 4096 --cpu-bind none --dry-run --no-python true
expect_eq "--nproc-per-node 4096: accepted" "$rc" 0

# --- node 1 of 2 whose node 0 never comes: joining the control plane waits as
#     long as --rdzv-conf's join timeout says, then fails naming the address;
#     no worker starts
rm -f "$d"/ran.*
t0=$(date +%s%N)
run RANK=1 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 DIR="$d" -- \
    --rdzv-conf join_timeout=1 --cpu-bind none --nproc-per-node 2 --no-python "$d/show"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
expect_eq "node 0 never comes: amlrun could not do its job (125)" "$rc" 125
check "node 0 never comes: the address and the timeout are named" \
    grep -q 'rendezvous at 127.0.0.1:3: only 1 of the 2 nodes needed joined within 1 s; no worker started' "$d/err"
check "node 0 never comes: no worker started" test ! -e "$d/ran.2"
diag "node 0 never comes: gave up after ${ms} ms (the message names the 1 s join timeout it waited)"

# --- in place without LOCAL_WORLD_SIZE on a machine with GPUs (the p4d's 8):
#     binding plans one rank per GPU; a local rank beyond them runs unbound
P4D=$TOP/tests/topologies/real/aws-ofi-nccl/p4d-topology.xml
run RANK=5 WORLD_SIZE=16 LOCAL_RANK=1 NODE_RANK=0 MASTER_ADDR=127.0.0.1 -- \
    --topology "$P4D" --report-bindings --dry-run --no-python true
check "in place, no LOCAL_WORLD_SIZE, 8 GPUs: local rank 1 gets GPU 1 and its share of NUMA 0" \
    grep -q '^amlrun: rank 5 (local 1): gpu 1 0000:10:1d.0, cpus 6-11,54-59 (6 cores), numa 0' "$d/err"
run RANK=9 WORLD_SIZE=16 LOCAL_RANK=9 NODE_RANK=0 MASTER_ADDR=127.0.0.1 -- \
    --topology "$P4D" --report-bindings --dry-run --no-python true
expect_eq "in place, no LOCAL_WORLD_SIZE, local rank 9 of 8 GPUs: runs" "$rc" 0
check "in place, local rank 9 of 8 GPUs: unbound, says why, no sharing warning" \
    sh -c "grep -q 'beyond the node.s GPUs: running unbound' '$d/err' && ! grep -q 'ranks on 8 GPUs' '$d/err'"
