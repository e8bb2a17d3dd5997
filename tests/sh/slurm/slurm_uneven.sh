#!/usr/bin/env bash
# amlruns split unevenly by srun (issue 39): `srun -N2 -n4`'s block layout
# puts 3 on n0 and 1 on n1.  One numbering: the step's node count
# (SLURM_STEP_NUM_NODES, alike on every task) decides, not each amlrun's
# node; read three ways (SLURM_NODEID, amlrun's exports, amldist_init in a
# linked worker), then a gloo DDP job.  And amlrun run straight from
# salloc's shell says in one line that it runs on this node only, and how
# to run it on every node.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/slurm.sh"
slurm_setup
HELLO=$BUILD/examples/hello
# shellcheck disable=SC2016
W='o=$("$0") || exit 1; echo "$(hostname) RANK=$RANK NODE=${NODE_RANK-} NODES=${GROUP_WORLD_SIZE-} LOCAL=$LOCAL_RANK/$LOCAL_WORLD_SIZE lib:$(printf "%s\n" "$o" | grep -E "^(NODE_RANK|NUM_NODES)=" | tr "\n" " ")"'

got=$(slurm_on n0 $T srun -N2 -n4 sh -c 'echo "$SLURM_PROCID $(hostname) $SLURM_NODEID"' | sort -n |
      cut -d' ' -f2,3 | uniq -c | awk '{print $2 "=" $3 ":" $1}' | tr '\n' ' ')
expect_eq "srun -N2 -n4: Slurm runs 3 tasks on n0 (node 0) and 1 on n1 (node 1)" "$got" "n0=0:3 n1=1:1 "
out=$(slurm_on n0 $T srun -N2 -n4 "$AMLRUN" --nproc-per-node 2 sh -c "$W" "$HELLO" 2>"$TEST_TMP/err")
expect_eq "srun -N2 -n4 amlrun --nproc-per-node 2: one node number a host, one count, exports and amldist_init alike" \
    "$(grep -E '^n[0-9] RANK=' <<<"$out" | sed -E 's/^(n[0-9]) RANK=[0-9]+ (.*) LOCAL=[0-9]+\/([0-9]+) (.*)$/\1 \2 \3 \4/' | sort | uniq -c | awk '{$1 = $1; print}' | tr '\n' ';')" \
    "6 n0 NODE=0 NODES=2 6 lib:NODE_RANK=0 NUM_NODES=2;2 n1 NODE=1 NODES=2 2 lib:NODE_RANK=1 NUM_NODES=2;"
expect_eq "srun -N2 -n4 amlrun --nproc-per-node 2: ranks 0..7 once each" \
    "$(grep -oE '^n[0-9] RANK=[0-9]+' <<<"$out" | cut -d= -f2 | sort -n | tr '\n' ' ')" "0 1 2 3 4 5 6 7 "
slurm_stderr

# The DDP job at one worker an amlrun: the numbering at two is checked
# above; what DDP adds is that torch takes it (4 workers importing torch,
# not 8: a second of CPU each).
if have_torch torch.distributed; then
    dir=$TEST_TMP/ddp
    mkdir -p "$dir"
    DDP_OUT=$dir/rank slurm_on n0 $T srun --kill-on-bad-exit=1 -N2 -n4 "$AMLRUN" --nproc-per-node 1 \
        --python "$TORCH_PY" "$TOP/tests/amlrun/ddp_replicas.py" >/dev/null 2>"$TEST_TMP/err"
    got=$(cat "$dir"/rank.* 2>/dev/null | sed -E 's/^(n[0-9]) rank=[0-9]+\/4 node=([0-9]) agree=True trained=True$/\1 \2/' | sort | uniq -c | awk '{$1 = $1; print}' | tr '\n' ';')
    expect_eq "srun -N2 -n4 amlrun: DDP (gloo) trains on all 4 ranks, node 0 on n0 and 1 on n1" "$got" "3 n0 0;1 n1 1;"
    [ "$got" = "3 n0 0;1 n1 1;" ] || diag "stderr: $(tail -c 1500 "$TEST_TMP/err")"
else
    skip "srun -N2 -n4 amlrun: DDP" "$TORCH_PY cannot import torch"
fi

# No step: one line says so, once, and the job runs here alone.
out=$(slurm_on n0 $T salloc -N2 "$AMLRUN" --nproc-per-node 2 "$REPORT" 2>&1)
expect_eq "salloc -N2 amlrun: one line says it runs on this node only, and how on every node" \
    "$(grep -c 'note: Slurm job [0-9]* has 2 nodes (SLURM_JOB_NUM_NODES) but this amlrun runs in no step of it, so on this node only; to run on every node: srun --ntasks-per-node 1 amlrun' <<<"$out")" 1
expect_eq "salloc -N2 amlrun: its 2 workers run on n0" "$(grep -oE '^n[0-9] RANK=[0-9]' <<<"$out" | sort | tr '\n' ' ')" "n0 RANK=0 n0 RANK=1 "
out=$(slurm_on n0 $T salloc -N2 "$AMLRUN" -q --nproc-per-node 2 "$REPORT" 2>&1)
expect_eq "salloc -N2 amlrun -q: no note" "$(grep -c 'runs in no step' <<<"$out")" 0
out=$(slurm_on n0 $T salloc -N1 "$AMLRUN" --nproc-per-node 2 "$REPORT" 2>&1)
expect_eq "salloc -N1 amlrun: no note (one node)" "$(grep -c 'runs in no step' <<<"$out")" 0
out=$(slurm_on n0 $T salloc -N2 srun -N2 --ntasks-per-node 1 "$AMLRUN" --nproc-per-node 2 "$REPORT" 2>&1)
expect_eq "salloc -N2 srun amlrun: no note, 4 workers" \
    "$(grep -c 'runs in no step' <<<"$out") $(grep -cE '^n[0-9] RANK=' <<<"$out")" "0 4"

expect_eq "no process left on any node" "$(slurm_leftovers)" ""
