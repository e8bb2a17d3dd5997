#!/usr/bin/env bash
# A real PyTorch DDP job (CPU, gloo, env://) under amlrun in its three
# modes; every replica must end with the same parameters and report it.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
if ! have_torch; then
    skip "PyTorch DDP" "$TORCH_PY cannot import torch"; exit 0
fi
EX=$TOP/examples/ddp_train.py
d=$TEST_TMP/ddp
mkdir -p "$d"

# ddp_ok NAME OUTFILE: 4 ranks 0..3, all agreeing, one checksum.
ddp_ok() {
    local ranks agree sums
    ranks=$(sed -n 's|^ddp rank \([0-9]*\)/4 .*|\1|p' "$2" | sort -n | tr '\n' ' ')
    agree=$(grep -c 'replicas agree: True' "$2")
    sums=$(sed -n 's/.*checksum //p' "$2" | sort -u | wc -l)
    if [ "$ranks" = "0 1 2 3 " ] && [ "$agree" = 4 ] && [ "$sums" = 1 ]; then
        ok "$1"
    else
        fail "$1"; sed 's/^/# /' "$2" | tail -n 20
    fi
}

"$AMLRUN" --nproc-per-node 4 --master-port "$(free_port)" "$EX" >"$d/a" 2>&1
rc=$?
expect_eq "DDP under amlrun --nproc-per-node 4: exit 0" "$rc" 0
ddp_ok "DDP under amlrun --nproc-per-node 4: replicas agree" "$d/a"

# mpirun's own output forwarding can lose or merge lines under load (see
# bench/launch.sh), so the ranks' output is read from per-rank files.
$MPIRUN --output-filename "$d/bo" -np 4 "$AMLRUN" --master-port "$(free_port)" "$EX" >"$d/b.console" 2>&1
rc=$?
cat "$d"/bo/1/rank.*/stdout >"$d/b" 2>/dev/null
expect_eq "DDP under mpirun -np 4 amlrun: exit 0" "$rc" 0
ddp_ok "DDP under mpirun -np 4 amlrun: replicas agree" "$d/b"

$MPIRUN --output-filename "$d/co" -np 2 "$AMLRUN" --nproc-per-node 2 --master-port "$(free_port)" "$EX" >"$d/c.console" 2>&1
rc=$?
cat "$d"/co/1/rank.*/stdout >"$d/c" 2>/dev/null
expect_eq "DDP under mpirun -np 2 amlrun --nproc-per-node 2: exit 0" "$rc" 0
ddp_ok "DDP under mpirun -np 2 amlrun --nproc-per-node 2: replicas agree" "$d/c"
