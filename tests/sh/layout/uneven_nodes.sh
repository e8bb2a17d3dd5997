#!/usr/bin/env bash
# amlruns split unevenly across nodes (issue 39): 3 on n0 and 1 on n1, and
# 2+1+1, each with --nproc-per-node 2, under Open MPI and MPICH's Hydra.
# One job, one numbering: the node count every amlrun sees alike decides
# (launcher/worker/control.c), never an amlrun's own node.  Open MPI counts
# the nodes (OMPI_MCA_orte_num_nodes): checked three ways against where
# Open MPI put each amlrun (the launcher), in amlrun's exports (NODE_RANK,
# GROUP_WORLD_SIZE) and in amldist_init of a linked worker, then a gloo DDP
# job.  Hydra names a node index only: every amlrun refuses alike, with the
# reason and the fix, and one amlrun per node (-ppn 1) still runs.
# amldist-test: slow
. "$(dirname "$0")/../../lib.sh"
stdin_without_end # mpiexec.hydra (tests/lib.sh)
. "$TOP/tests/multinode.sh"
MULTINODE_TIMEOUT=120
multinode_setup 3
HELLO=$BUILD/examples/hello
DDP=$TOP/tests/amlrun/ddp_replicas.py
# A worker's line: its host, amlrun's exports, and amldist_init's reading.
# shellcheck disable=SC2016
W='o=$("$0") || exit 1; echo "$(hostname) RANK=$RANK NODE=${NODE_RANK-} GROUP=${GROUP_RANK-} NODES=${GROUP_WORLD_SIZE-} LOCAL=$LOCAL_RANK/$LOCAL_WORLD_SIZE lib:$(printf "%s\n" "$o" | grep -E "^(NODE_RANK|NUM_NODES)=" | tr "\n" " ")"'

# numbered NAME NHOSTS OUTPUT: one numbering: every host one node number
# (exports and library alike), 0..N-1 in host order, N everywhere, ranks
# 0..R-1 once each, the local world a host's worker count.
numbered() {
    local name=$1 n=$2 out=$3 lines
    lines=$(grep -E '^n[0-9] RANK=' <<<"$out")
    expect_eq "$name: one node number a host, the same in the exports and amldist_init" \
        "$(sed -E 's/^(n[0-9]) .*NODE=([0-9]*) GROUP=([0-9]*) NODES=([0-9]*) .*lib:NODE_RANK=([0-9]*) NUM_NODES=([0-9]*) $/\1 \2 \3 \4 \5 \6/' <<<"$lines" | sort -u | tr '\n' ';')" \
        "$(for ((i = 0; i < n; i++)); do printf 'n%d %d %d %d %d %d;' $i $i $i $n $i $n; done)"
    local r=$(($(wc -l <<<"$lines")))
    expect_eq "$name: ranks 0..$((r - 1)) once each" \
        "$(grep -o ' RANK=[0-9]*' <<<"$lines" | cut -d= -f2 | sort -n | tr '\n' ' ')" "$(seq 0 $((r - 1)) | tr '\n' ' ')"
    local h bad=""
    for h in $(cut -d' ' -f1 <<<"$lines" | sort -u); do
        local k
        k=$(grep -c "^$h " <<<"$lines")
        grep "^$h " <<<"$lines" | grep -vq "LOCAL=[0-9]*/$k " && bad+="$h "
    done
    expect_eq "$name: the local world is the host's worker count" "$bad" ""
}

# Open MPI: where it puts the amlruns, then amlrun per node on them.
for c in 3+1:n0:3,n1:1 2+1+1:n0:2,n1:1,n2:1 1+3:n0:1,n1:3; do
    name=${c%%:*} hosts=${c#*:}
    nh=$(tr ',' '\n' <<<"$hosts" | wc -l)
    got=$(on n0 $T $MPIRUN --host "$hosts" -np 4 sh -c 'echo "$OMPI_COMM_WORLD_RANK $(hostname)"' 2>/dev/null |
          sort -n | cut -d' ' -f2 | uniq -c | awk '{print $2 ":" $1}' | tr '\n' ',')
    expect_eq "ompi $name: Open MPI runs the amlruns $hosts" "$got" "$hosts,"
    out=$(on n0 $T $MPIRUN --host "$hosts" -np 4 --bind-to none -x MASTER_PORT=$PORT \
          "$AMLRUN" --nproc-per-node 2 sh -c "$W" "$HELLO" 2>&1)
    PORT=$((PORT + 3))
    numbered "ompi $name" "$nh" "$out"
done
# One amlrun per node, the neighbour: the rendezvous numbers them.
out=$(on n0 $T $MPIRUN --host n0,n1,n2 -np 3 --bind-to none -x MASTER_PORT=$PORT \
      "$AMLRUN" --nproc-per-node 2 sh -c "$W" "$HELLO" 2>&1)
PORT=$((PORT + 3))
numbered "ompi 1+1+1" 3 "$out"

# The DDP job at one worker an amlrun: the numbering at two a worker is
# checked above, three ways; what DDP adds is that torch takes it (4
# workers importing torch, not 8: a second of CPU each).
if have_torch torch.distributed; then
    rm -f "$TEST_TMP"/ddp.*
    on n0 $T $MPIRUN --host n0:3,n1:1 -np 4 --bind-to none -x MASTER_PORT=$PORT \
        -x DDP_OUT="$TEST_TMP/ddp" "$AMLRUN" --nproc-per-node 1 --python "$TORCH_PY" "$DDP" \
        >"$TEST_TMP/ddp.console" 2>&1
    got=$(cat "$TEST_TMP"/ddp.[0-9]* 2>/dev/null | sed -E 's/^(n[0-9]) rank=[0-9]+\/4 node=([0-9]) agree=True trained=True$/\1 \2/' | sort | uniq -c | awk '{$1 = $1; print}' | tr '\n' ';')
    expect_eq "ompi 3+1: DDP (gloo) trains on all 4 ranks, node 0 on n0 and 1 on n1" "$got" "3 n0 0;1 n1 1;"
    [ "$got" = "3 n0 0;1 n1 1;" ] || diag "$(tail -5 "$TEST_TMP/ddp.console")"
    PORT=$((PORT + 3))
else
    skip "ompi 3+1: DDP" "$TORCH_PY cannot import torch"
fi

# Hydra: no node count, so shared nodes are refused alike, on every amlrun,
# whichever node holds the lone one.
HY="mpiexec.hydra -launcher ssh -launcher-exec $TOP/scripts/ompi-rsh-agent"
M="-genv MASTER_ADDR $(node_addr n0)"
for c in 3+1:n0:3,n1:1 1+3:n0:1,n1:3 2+1+1:n0:2,n1:1,n2:1; do
    name=${c%%:*} hosts=${c#*:}
    rc=0
    out=$(on n0 $T $HY -hosts "$hosts" -n 4 $M -genv MASTER_PORT $PORT "$AMLRUN" --nproc-per-node 2 \
          sh -c "$W" "$HELLO" 2>&1) || rc=$?
    PORT=$((PORT + 3))
    expect_eq "hydra $name: the job is refused (exit status 2)" "$rc" 2
    check "hydra $name: the reason and the fix" \
        grep -q "amlruns are not one per node, .*the launcher does not say how many nodes there are.*start one amlrun per node: mpiexec -ppn 1" <<<"$out"
    # Where the lone amlrun holds rank 0 it cannot tell (its node index is
    # its rank): its workers may start before the others' refusal stops
    # them.  Elsewhere none starts.
    [ "$name" = 1+3 ] || expect_eq "hydra $name: no worker starts" \
        "$(grep -c '^n[0-9] RANK=' <<<"$out")" 0
done
out=$(on n0 $T $HY -hosts n0,n1 -n 2 -ppn 1 $M -genv MASTER_PORT $PORT "$AMLRUN" --nproc-per-node 2 \
      sh -c "$W" "$HELLO" 2>&1)
PORT=$((PORT + 3))
numbered "hydra one per node (-ppn 1)" 2 "$out"

expect_eq "no process left on any node" "$(leftovers)" ""
