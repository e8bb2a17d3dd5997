#!/usr/bin/env bash
# A Kubeflow PyTorchJob with one amlrun per pod: each namespace node is a
# pod with exactly the variables the training operator gives it (no
# Kubernetes here): MASTER_ADDR, MASTER_PORT, RANK = the pod's index,
# WORLD_SIZE, PET_NPROC_PER_NODE, PET_NNODES and, in later operators,
# PET_NODE_RANK, in an otherwise clean login environment.  WORLD_SIZE counts
# the pods (operators before nprocPerNode, or nprocPerNode auto) or pods
# times nprocPerNode.  Checked three ways: what torchrun (the launcher the
# operator prepares these variables for) gives its workers, what amlrun
# gives its workers, and what amldist_init derives, in a pod's own process
# and in each worker.  Then a real gloo DDP job.
# amldist-test: slow (one of the longest: tests/run.sh starts it early)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
if ! have_torch torch.distributed; then
    skip "Kubeflow pods" "$TORCH_PY cannot import torch"
    exit 0
fi
MULTINODE_TIMEOUT=120
multinode_setup 2
TORCHRUN=("$TORCH_PY" "$TOP/bench/torchrun-wrapper.py")
HELLO=$BUILD/examples/hello
NPROC=2

# One line per worker with the torchrun variables, then one with what
# amldist_init derives in that worker ("LIB host ...").
W=$TEST_TMP/worker.sh
cat >"$W" <<EOF
#!/bin/sh
lib=\$("$HELLO" | grep -E '^(RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|NODE_RANK|NUM_NODES|MASTER_ADDR)=' | tr '\n' ' ')
printf '%s RANK=%s WORLD_SIZE=%s LOCAL_RANK=%s LOCAL_WORLD_SIZE=%s GROUP_RANK=%s MASTER_ADDR=%s MASTER_PORT=%s\nLIB %s %s\n' \\
    "\$(hostname)" "\${RANK-}" "\${WORLD_SIZE-}" "\${LOCAL_RANK-}" "\${LOCAL_WORLD_SIZE-}" \\
    "\${GROUP_RANK-}" "\${MASTER_ADDR-}" "\${MASTER_PORT-}" "\$(hostname)" "\$lib"
EOF
chmod +x "$W"

# operator VERSION POD PORT: the pod's variables.  old: WORLD_SIZE = pods;
# new: WORLD_SIZE = pods * nprocPerNode and PET_NODE_RANK.
operator() {
    local pods=2
    printf '%s\n' MASTER_ADDR=n0 "MASTER_PORT=$3" "RANK=$2" PYTHONUNBUFFERED=0 \
        "PET_NPROC_PER_NODE=$NPROC" "PET_NNODES=$pods"
    if [ "$1" = new ]; then
        printf '%s\n' "WORLD_SIZE=$((pods * NPROC))" "PET_NODE_RANK=$2"
    else
        printf '%s\n' "WORLD_SIZE=$pods"
    fi
}

# pods OUT VERSION PORT UNSET CMD...: CMD in both pods at once, with pod i's
# variables less those named in UNSET; the outputs in OUT.0 and OUT.1,
# their statuses in rc0 and rc1.  "@RANK" in CMD is the pod's RANK.
pods() {
    local out=$1 version=$2 port=$3 unset=$4 i p0 p1 v
    shift 4
    for i in 0 1; do
        local envs=() args=()
        while read -r v; do
            case " $unset " in *" ${v%%=*} "*) continue ;; esac
            envs+=("$v")
        done < <(operator "$version" "$i" "$port")
        for v in "$@"; do args+=("${v//@RANK/$i}"); done
        on_login "n$i" env "${envs[@]}" $T "${args[@]}" >"$out.$i" 2>&1 &
        if [ "$i" = 0 ]; then p0=$!; else p1=$!; fi
    done
    rc0=0; wait "$p0" || rc0=$?
    rc1=0; wait "$p1" || rc1=$?
}

# The lines a correct job's workers print: pod i's worker l is rank
# i * NPROC + l of 2 * NPROC, as torchrun numbers them.
want_workers() {
    local port=$1 i l
    for i in 0 1; do
        for l in $(seq 0 $((NPROC - 1))); do
            printf 'n%s RANK=%s WORLD_SIZE=%s LOCAL_RANK=%s LOCAL_WORLD_SIZE=%s GROUP_RANK=%s MASTER_ADDR=n0 MASTER_PORT=%s\n' \
                "$i" $((i * NPROC + l)) $((2 * NPROC)) "$l" "$NPROC" "$i" "$port"
        done
    done
}
want_lib() {
    local i l
    for i in 0 1; do
        for l in $(seq 0 $((NPROC - 1))); do
            printf 'LIB n%s RANK=%s WORLD_SIZE=%s LOCAL_RANK=%s LOCAL_WORLD_SIZE=%s NODE_RANK=%s NUM_NODES=2 MASTER_ADDR=n0 \n' \
                "$i" $((i * NPROC + l)) $((2 * NPROC)) "$l" "$NPROC" "$i"
        done
    done
}
workers() { cat "$1.0" "$1.1" | grep -E '^n[0-9] RANK=' | sort -t= -k2,2n; }
libs() { cat "$1.0" "$1.1" | grep '^LIB ' | sort -t= -k2,2n; }
diag_out() { diag "pod 0: $(tail -c 600 "$1.0")"; diag "pod 1: $(tail -c 600 "$1.1")"; }

port=$PORT
for version in old new; do
    # amldist_init in the pod's own process: node RANK of PET_NNODES, alone.
    pods "$TEST_TMP/$version-lib" "$version" "$port" "" "$HELLO"
    got=$(for i in 0 1; do grep -E '^(RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|NODE_RANK|NUM_NODES|MASTER_ADDR)=' \
              "$TEST_TMP/$version-lib.$i" | tr '\n' ' '; echo; done)
    expect_eq "$version operator: amldist_init in each pod: pod RANK of PET_NNODES, one process per pod" \
        "$got" "$(for i in 0 1; do echo "RANK=$i WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 NODE_RANK=$i NUM_NODES=2 MASTER_ADDR=n0 "; done)"

    # torchrun in each pod, with the options Kubeflow's examples pass where
    # the operator sets no PET_NODE_RANK / PET_MASTER_ADDR.
    tr_args=(--no_python)
    [ "$version" = old ] && tr_args+=(--node_rank @RANK)
    tr_args+=(--master_addr n0 --master_port "$port")
    pods "$TEST_TMP/$version-t" "$version" "$port" "" "${TORCHRUN[@]}" "${tr_args[@]}" "$W"
    expect_eq "$version operator: torchrun per pod: both exit 0" "$rc0 $rc1" "0 0"
    expect_eq "$version operator: torchrun's workers are numbered pod * nproc + local" \
        "$(workers "$TEST_TMP/$version-t")" "$(want_workers "$port")"
    [ "$rc0 $rc1" = "0 0" ] || diag_out "$TEST_TMP/$version-t"
    port=$((port + 1))

    # amlrun with torchrun's command line, then with the variables alone.
    pods "$TEST_TMP/$version-a" "$version" "$port" "" "$AMLRUN" "${tr_args[@]}" "$W"
    expect_eq "$version operator: amlrun with torchrun's options: both exit 0" "$rc0 $rc1" "0 0"
    [ "$rc0 $rc1" = "0 0" ] || diag_out "$TEST_TMP/$version-a"
    expect_eq "$version operator: amlrun with torchrun's options: torchrun's numbers" \
        "$(workers "$TEST_TMP/$version-a" | sed "s/MASTER_PORT=$port/MASTER_PORT=$((port - 1))/")" \
        "$(workers "$TEST_TMP/$version-t")"
    expect_eq "$version operator: amlrun with torchrun's options: amldist_init in each worker agrees" \
        "$(libs "$TEST_TMP/$version-a")" "$(want_lib)"
    port=$((port + 1))
    pods "$TEST_TMP/$version-e" "$version" "$port" "" "$AMLRUN" --no-python "$W"
    expect_eq "$version operator: amlrun, the pod's variables alone: both exit 0" "$rc0 $rc1" "0 0"
    [ "$rc0 $rc1" = "0 0" ] || diag_out "$TEST_TMP/$version-e"
    expect_eq "$version operator: amlrun, the pod's variables alone: torchrun's numbers" \
        "$(workers "$TEST_TMP/$version-e")" "$(want_workers "$port")"
    expect_eq "$version operator: amlrun, the pod's variables alone: amldist_init agrees" \
        "$(libs "$TEST_TMP/$version-e")" "$(want_lib)"
    port=$((port + 1))
done

# Without PET_NNODES, --nnodes equal to WORLD_SIZE (the pods) says the same.
pods "$TEST_TMP/nn" old "$port" "PET_NNODES" "$AMLRUN" --nnodes 2 --no-python "$W"
expect_eq "--nnodes = WORLD_SIZE, no PET_NNODES: both exit 0" "$rc0 $rc1" "0 0"
[ "$rc0 $rc1" = "0 0" ] || diag_out "$TEST_TMP/nn"
expect_eq "--nnodes = WORLD_SIZE, no PET_NNODES: torchrun's numbers" \
    "$(workers "$TEST_TMP/nn")" "$(want_workers "$port")"
port=$((port + 1))
# A --node-rank other than the pod's RANK is refused on that pod, naming both.
rc=0
mapfile -t pod0 < <(operator old 0 "$port")
on_login n0 env "${pod0[@]}" $T "$AMLRUN" --node-rank 1 --no-python "$W" \
    >"$TEST_TMP/nr.0" 2>&1 || rc=$?
expect_eq "--node-rank 1 in pod 0 (RANK=0): refused (2)" "$rc" 2
check "--node-rank 1 in pod 0: the message names RANK=0" grep -q -- '--node-rank 1 conflicts with derived: RANK=0' "$TEST_TMP/nr.0"
port=$((port + 1))

# A real gloo DDP job, the pod's variables alone.
DDP=$TOP/tests/amlrun/ddp_replicas.py
pods "$TEST_TMP/ddp" old "$port" "" "$AMLRUN" --python "$TORCH_PY" "$DDP"
got=$(cat "$TEST_TMP/ddp.0" "$TEST_TMP/ddp.1" | grep -E '^n[0-9] rank=' | sort -t= -k2,2n)
expect_eq "DDP, one amlrun per pod: four replicas agree and trained" "$got" \
    "$(printf 'n%s rank=%s/4 node=%s agree=True trained=True\n' 0 0 0 0 1 0 1 2 1 1 3 1)"
[ "$rc0 $rc1" = "0 0" ] || diag_out "$TEST_TMP/ddp"

expect_eq "no process left on any node" "$(leftovers)" ""
