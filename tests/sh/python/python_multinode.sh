#!/usr/bin/env bash
# Real PyTorch DDP (gloo, CPU) across two nodes of the namespace cluster
# with mpirun starting python itself, by slot (and by node the same layout
# and environment export() gives, without PyTorch): the ranks have
# only OMPI_* variables, and amldist.export() gives init_process_group
# ("env://") the rank, the node and the master (mpirun's node, where rank 0
# runs) as libamldist derives them; the port is torchrun's default.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
. "$TOP/tests/python.sh"
py_setup
if ! py_has_torch; then
    skip "multi-node DDP with amldist.export()" "$TORCH_PY cannot import torch"; exit 0
fi
MULTINODE_TIMEOUT=120
multinode_setup 2
DDP=$TOP/python/tests/ddp_export.py

# ddp_ok NAME DIR HOST... (hosts of ranks 0..3; 2 ranks a node).
ddp_ok() {
    local name=$1 dir=$2 want="" r=0 host got
    declare -A seen=()
    shift 2
    for host in "$@"; do
        want+="$host rank=$r/4 local=${seen[$host]:-0}/2 node=${host#n} launcher=ompi canonical=False"
        want+=" agree=True trained=True binding=plan"$'\n'
        seen[$host]=$((${seen[$host]:-0} + 1))
        r=$((r + 1))
    done
    got=$(cat "$dir"/rank.* 2>/dev/null | sort -t= -k2,2n | sed 's/ gpu=.*//')
    if [ "$got" = "${want%$'\n'}" ]; then ok "$name"
    else fail "$name"; diag "got: $got"; diag "want: $want"; sed 's/^/# /' "$dir.err" | tail -n 20; fi
}

# run_ddp NAME TAG HOSTS MPIRUN-ARGS...
run_ddp() {
    local name=$1 d=$TEST_TMP/$2 hosts=$3
    shift 3
    mkdir -p "$d"
    on n0 $T env DDP_OUT="$d/rank" $MPIRUN -x DDP_OUT -x PYTHONPATH -x AMLDIST_LIBRARY "$@" \
        "$TORCH_PY" "$DDP" >/dev/null 2>"$d.err"
    expect_eq "$name: exit 0" "$?" 0
    # shellcheck disable=SC2086
    ddp_ok "$name: DDP after amldist.export() from OMPI_* alone" "$d" $hosts
}
run_ddp "mpirun --host n0:2,n1:2 python train.py (by slot)" slot "n0 n0 n1 n1" \
    -np 4 --host n0:2,n1:2

# By node, without PyTorch (python/tests/export_env.py): the layout
# export() derives and what it puts in the environment, all that
# init_process_group("env://") reads; the job by slot above shows torch
# taking it across nodes.  Four more workers importing torch would check
# nothing more (a second of CPU each).
d=$TEST_TMP/node; mkdir -p "$d"
on n0 $T env DDP_OUT="$d/rank" $MPIRUN -x DDP_OUT -x PYTHONPATH -x AMLDIST_LIBRARY -np 4 \
    --host n0:2,n1:2 --map-by node "$TORCH_PY" "$TOP/python/tests/export_env.py" >/dev/null 2>"$d.err"
expect_eq "mpirun --host n0:2,n1:2 --map-by node python: exit 0" "$?" 0
# rank 0's node, by name or by address, the same on every rank
master=$(sed -n 's/^n0 rank=0\/4 .* master=\([^ :]*\):.*/\1/p' "$d/rank.0" 2>/dev/null)
check "mpirun --map-by node python: the master is rank 0's node, n0 ($master)" \
    test -n "$master" -a \( "$master" = n0 -o "$master" = "$(node_addr n0)" \)
want=""
for r in 0 1 2 3; do
    want+="n$((r % 2)) rank=$r/4 local=$((r / 2))/2 node=$((r % 2)) launcher=ompi canonical=False"
    want+=" env=$r/4 local=$((r / 2))/2 master=$master:29500 binding=plan"$'\n'
done
expect_eq "mpirun --host n0:2,n1:2 --map-by node python: amldist.export() from OMPI_* alone sets what env:// reads" \
    "$(cat "$d"/rank.* 2>/dev/null | sort -t= -k2,2n)" "${want%$'\n'}"

expect_eq "no process left on any node" "$(leftovers)" ""
