#!/usr/bin/env bash
# Open MPI layouts whose variables cannot place rank 0 (issue 39): MPMD with
# hosts per app context (2 and 3 contexts), --map-by seq in two orders,
# --map-by ppr:1:node with MPMD.  Never mpirun's node by assumption: checked
# three ways against where Open MPI really put rank 0 (the launcher):
# amldist_init in the rank (PMIx's host of rank 0 on every rank, and one
# node numbering 0..N-1 by host, the same count everywhere), amlrun per
# process (no PMIx before its exec: no MASTER_ADDR, the same reason and fix
# on every rank), and a PyTorch DDP job (gloo) given the master with -x.
# amldist-test: slow (one of the longest: tests/run.sh starts it early)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
MULTINODE_TIMEOUT=120
multinode_setup 3
HELLO=$BUILD/examples/hello
DDP=$TOP/tests/amlrun/ddp_replicas.py
printf 'n1\nn0\nn0\nn1\n' >"$TEST_TMP/seq_a"
printf 'n2\nn0\nn1\nn0\n' >"$TEST_TMP/seq_b"

# job CASE PROGRAM...: mpirun's arguments of CASE, PROGRAM in every app
# context, in JOB (an array), after the options in CTX: Open MPI takes -x
# per app context (one before the first ':' reaches the first context's
# ranks alone).
job() {
    local c=$1 spec word
    shift
    case $c in
    mpmd2) spec="-np 1 --host n1 @ : -np 2 --host n0:2 @" ;;
    mpmd3) spec="-np 1 --host n2 @ : -np 1 --host n1 @ : -np 2 --host n0:2 @" ;;
    seq_a | seq_b) spec="--hostfile $TEST_TMP/$c --map-by seq -np 4 @" ;;
    ppr) spec="--host n0:2,n1:2 -np 2 --map-by ppr:1:node @ : -np 2 --map-by ppr:1:node @" ;;
    esac
    JOB=()
    for word in $spec; do
        if [ "$word" = @ ]; then JOB+=(${CTX[@]+"${CTX[@]}"} "$@"); else JOB+=("$word"); fi
    done
}
CTX=()
counted() { sort | uniq -c | awk '{$1 = $1; print}' | tr '\n' ';'; }

# shellcheck disable=SC2016
for c in mpmd2 mpmd3 seq_a seq_b ppr; do
    job "$c" sh -c '[ "$OMPI_COMM_WORLD_RANK" != 0 ] || hostname'
    rank0=$(on n0 $T $MPIRUN "${JOB[@]}" 2>/dev/null)
    check "$c: Open MPI puts rank 0 on a node ($rank0)" test -n "$rank0"

    # amldist_init, PMIx asked: every rank names rank 0's host, and the
    # nodes are numbered once: one number per host, 0..N-1, N everywhere.
    job "$c" sh -c 'o=$("$0") && echo "$(hostname) $(printf "%s\n" "$o" |
        grep -E "^(NODE_RANK|NUM_NODES|MASTER_ADDR)=" | tr "\n" " ")"' "$HELLO"
    pmix_run "$TEST_TMP/lib.$c" on n0 $T $MPIRUN "${JOB[@]}"
    got=$(grep -o 'MASTER_ADDR=[^ ]*' "$TEST_TMP/lib.$c" | counted)
    ranks=$(grep -c '^n[0-9] ' "$TEST_TMP/lib.$c")
    expect_eq "$c: amldist_init: every rank's master is rank 0's host" "$got" "$ranks MASTER_ADDR=$rank0;"
    pairs=$(grep -oE '^n[0-9] NODE_RANK=[0-9]+ NUM_NODES=[0-9]+' "$TEST_TMP/lib.$c" | sort -u)
    nnodes=$(cut -d' ' -f1 <<<"$pairs" | sort -u | wc -l)
    want=$(seq 0 $((nnodes - 1)) | tr '\n' ' ')
    expect_eq "$c: amldist_init: one node number per host" "$(wc -l <<<"$pairs")" "$nnodes"
    expect_eq "$c: amldist_init: the node numbers are 0..N-1" \
        "$(grep -o 'NODE_RANK=[0-9]*' <<<"$pairs" | cut -d= -f2 | sort -n | tr '\n' ' ')" "$want"
    expect_eq "$c: amldist_init: one node count, N" \
        "$(grep -o 'NUM_NODES=[0-9]*' <<<"$pairs" | sort -u)" "NUM_NODES=$nnodes"

    # amlrun per process: no PMIx before its exec, so no master, and every
    # rank says why and how to give it.
    job "$c" "$AMLRUN" "$REPORT"
    out=$(on n0 $T $MPIRUN "${JOB[@]}" 2>&1)
    expect_eq "$c: amlrun: no rank gets a MASTER_ADDR" \
        "$(grep -E '^n[0-9] RANK=' <<<"$out" | grep -o 'MASTER_ADDR=[^ ]*' | counted)" "$ranks MASTER_ADDR=;"
    expect_eq "$c: amlrun: every rank gives one reason, with the fix" \
        "$(grep 'MASTER_ADDR is not known' <<<"$out" | grep -c 'may put rank 0 away from\|the mapping, not mpirun.s node, places rank 0; give it: mpirun -x MASTER_ADDR=')" "$ranks"
    diag "$c: $(grep -m1 'MASTER_ADDR is not known' <<<"$out")"
done

# Where the master is given, the job runs: DDP per process, and per node.
if have_torch torch.distributed; then
    for c in mpmd2:3 seq_a:4; do
        world=${c#*:} c=${c%:*}
        job "$c" sh -c '[ "$OMPI_COMM_WORLD_RANK" != 0 ] || hostname'
        rank0=$(on n0 $T $MPIRUN "${JOB[@]}" 2>/dev/null)
        CTX=(-x MASTER_ADDR="$rank0" -x MASTER_PORT="$PORT" -x DDP_OUT="$TEST_TMP/ddp.$c")
        job "$c" "$AMLRUN" --python "$TORCH_PY" "$DDP"
        CTX=()
        rm -f "$TEST_TMP/ddp.$c".*
        on n0 $T $MPIRUN "${JOB[@]}" >"$TEST_TMP/ddp.$c.console" 2>&1
        got=$(cat "$TEST_TMP/ddp.$c".* 2>/dev/null | grep -c 'agree=True trained=True')
        expect_eq "$c: -x MASTER_ADDR=$rank0: DDP (gloo) trains on every rank" "$got" "$world"
        [ "$got" = "$world" ] || diag "$(tail -5 "$TEST_TMP/ddp.$c.console")"
        PORT=$((PORT + 1))
    done
else
    skip "DDP under MPMD and seq" "$TORCH_PY cannot import torch"
fi

expect_eq "no process left on any node" "$(leftovers)" ""
