#!/usr/bin/env bash
# A real PyTorch DDP job (CPU, gloo, env://) under amlrun in its modes
# under mpirun; every replica must end with the same parameters and report
# it.  Two workers per process, two nodes of two per node (where node
# ranks and local ranks both count): each PyTorch worker's import costs a
# second of CPU.  Standalone on one node (`amlrun --nproc-per-node 2
# examples/ddp_train.py`, README's first command) runs in amlrun_ports.sh,
# with port 29500 taken, whose workers must agree as these do (the example
# exits 1 if they do not), in amlrun_docs.sh with Azure ML's arguments,
# and with python/tests/ddp_export.py in python_ddp.sh.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
if ! have_torch; then
    skip "PyTorch DDP" "$TORCH_PY cannot import torch"; exit 0
fi
EX=$TOP/examples/ddp_train.py
d=$TEST_TMP/ddp
mkdir -p "$d"

# ddp_ok NAME OUTFILE N: N ranks 0..N-1, all agreeing, one checksum.
ddp_ok() {
    local ranks agree sums n=$3
    ranks=$(sed -n "s|^ddp rank \\([0-9]*\\)/$n .*|\\1|p" "$2" | sort -n | tr '\n' ' ')
    agree=$(grep -c 'replicas agree: True' "$2")
    sums=$(sed -n 's/.*checksum //p' "$2" | sort -u | wc -l)
    if [ "$ranks" = "$(seq -s ' ' 0 $((n - 1))) " ] && [ "$agree" = "$n" ] && [ "$sums" = 1 ]; then
        ok "$1"
    else
        fail "$1"; sed 's/^/# /' "$2" | tail -n 20
    fi
}

# mpirun's own output forwarding can lose or merge lines under load (see
# bench/launch.sh), so the ranks' output is read from per-rank files.
$MPIRUN --output-filename "$d/bo" -np 2 "$AMLRUN" --master-port "$(free_port)" "$EX" >"$d/b.console" 2>&1
rc=$?
cat "$d"/bo/1/rank.*/stdout >"$d/b" 2>/dev/null
expect_eq "DDP under mpirun -np 2 amlrun: exit 0" "$rc" 0
ddp_ok "DDP under mpirun -np 2 amlrun: replicas agree" "$d/b" 2

$MPIRUN --output-filename "$d/co" -np 2 "$AMLRUN" --nproc-per-node 2 --master-port "$(free_port)" "$EX" >"$d/c.console" 2>&1
rc=$?
cat "$d"/co/1/rank.*/stdout >"$d/c" 2>/dev/null
expect_eq "DDP under mpirun -np 2 amlrun --nproc-per-node 2: exit 0" "$rc" 0
ddp_ok "DDP under mpirun -np 2 amlrun --nproc-per-node 2: replicas agree" "$d/c" 4
