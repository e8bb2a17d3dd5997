#!/usr/bin/env bash
# MPICH 4's mpiexec.hydra inside a Slurm allocation (issue 39), for real on
# the test's two-node Slurm (tests/slurm.sh): Hydra starts its proxies with
# one srun step (`hydra_pmi_proxy --launcher slurm ... --proxy-id -1`), each
# proxy taking its node index from its task's SLURM_NODEID, and passes that
# step's variables on to its ranks.  Each layout is read three ways: what
# Hydra did (each rank's host, PMI_RANK, MPI_LOCALRANKID/MPI_LOCALNRANKS;
# node i is the host of proxy i, which holds Hydra's lowest ranks first),
# what amlrun exports (per process, and per node with --nproc-per-node 2),
# and what amldist_init derives (examples/hello); then a gloo DDP job.
. "$(dirname "$0")/../../lib.sh"
stdin_without_end # mpiexec.hydra (tests/lib.sh)
if ! have mpiexec.hydra; then
    skip "hydra under Slurm" "mpiexec.hydra not installed (Debian package mpich)"
    exit 0
fi
. "$TOP/tests/slurm.sh"
slurm_setup
HELLO=$BUILD/examples/hello
N0=$(node_addr n0)
PORT=$((20000 + RANDOM % 20000))
M="-genv MASTER_ADDR $N0 -genv MASTER_PORT $PORT"
VIEW=$TEST_TMP/view
mkdir -p "$VIEW"
# Hydra's output forwarding may join the lines of ranks: each rank writes
# a file of its own (the nodes share $TEST_TMP).
# hy ARGS... -- CMD...: salloc -N2 mpiexec.hydra ARGS CMD on n0.
hy() {
    local args=()
    while [ "$1" != -- ]; do args+=("$1"); shift; done
    shift
    slurm_on n0 $T salloc -N2 mpiexec.hydra "${args[@]}" "$@" 2>"$TEST_TMP/err"
}

# hydra_case NAME HYDRA_ARG...: the three readings of one layout, per
# process.  Sets WANT (report lines in rank order) and NODES.
hydra_case() {
    local name=$1
    shift
    rm -f "$VIEW"/*
    # shellcheck disable=SC2016
    hy "$@" -- sh -c 'echo "$(hostname) $PMI_RANK $MPI_LOCALRANKID $MPI_LOCALNRANKS $PMI_SIZE" >"$0.$PMI_RANK"' "$VIEW/t" >/dev/null
    local lines
    lines=$(cat "$VIEW"/t.* 2>/dev/null | sort -k2,2n)
    # Nodes numbered by their lowest rank: proxy 0 holds rank 0, and so on.
    WANT=$(awk -v m="$N0" -v p="$PORT" '
        !($1 in node) { node[$1] = n++ }
        { printf "%s RANK=%s LOCAL_RANK=%s NODE_RANK=%s WORLD_SIZE=%s LOCAL_WORLD_SIZE=%s MASTER_ADDR=%s MASTER_PORT=%s\n",
                 $1, $2, $3, node[$1], $5, $4, m, p }' <<<"$lines")
    NODES=$(cut -d' ' -f1 <<<"$lines" | sort -u | grep -c .)
    check "$name: Hydra ran the ranks (hosts by rank: $(cut -d' ' -f1 <<<"$lines" | tr '\n' ' '))" \
        test -n "$lines"
    local got
    got=$(hy "$@" $M -- "$AMLRUN" "$REPORT" | by_rank)
    expect_eq "$name: amlrun per process exports Hydra's layout" "$got" "$WANT"
    [ "$got" = "$WANT" ] && [ -n "$WANT" ] || diag "stderr: $(head -c 800 "$TEST_TMP/err")"
    rm -f "$VIEW"/*
    # shellcheck disable=SC2016
    hy "$@" $M -- sh -c '"$1" --explain >"$0.$PMI_RANK"' "$VIEW/h" "$HELLO" >/dev/null
    got=$(for f in "$VIEW"/h.*; do
        awk -F= -v h="$(sed -n 's/^EXPLAIN_NODE_RANK=.*hydra_pmi_proxy --launcher slurm.*/x/p' "$f")" '
            { v[$1] = substr($0, length($1) + 2) }
            END { printf "RANK=%s NODE_RANK=%s NUM_NODES=%s WORLD_SIZE=%s LOCAL_WORLD_SIZE=%s\n",
                         v["RANK"], v["NODE_RANK"], v["NUM_NODES"], v["WORLD_SIZE"], v["LOCAL_WORLD_SIZE"] }' "$f"
        done | sort -t= -k2,2n)
    expect_eq "$name: amldist_init derives the same, and $NODES nodes" "$got" \
        "$(sed -E "s/^[^ ]+ RANK=([0-9]+) LOCAL_RANK=[0-9]+ NODE_RANK=([0-9]+) WORLD_SIZE=([0-9]+) LOCAL_WORLD_SIZE=([0-9]+) .*/RANK=\1 NODE_RANK=\2 NUM_NODES=$NODES WORLD_SIZE=\3 LOCAL_WORLD_SIZE=\4/" <<<"$WANT")"
}

hydra_case "salloc -N2 mpiexec.hydra -n 4" -n 4
hydra_case "salloc -N2 mpiexec.hydra -n 4 -ppn 2" -n 4 -ppn 2
hydra_case "salloc -N2 mpiexec.hydra -hosts n0:3,n1:1 -n 4 (3+1)" -hosts n0:3,n1:1 -n 4
# Hydra lists n1 first, but its proxies number themselves by SLURM_NODEID:
# whatever it does, the readings follow it.
hydra_case "salloc -N2 mpiexec.hydra -hosts n1:3,n0:1 -n 4" -hosts n1:3,n0:1 -n 4
hydra_case "salloc -N2 mpiexec.hydra -n 1 (one node of two)" -n 1

# The explanation names the proxy's srun step, never "no Hydra proxy".
rm -f "$VIEW"/*
# shellcheck disable=SC2016
hy -n 4 -- sh -c '"$1" --explain >"$0.$PMI_RANK"' "$VIEW/x" "$HELLO" >/dev/null
got=$(cat "$VIEW"/x.* 2>/dev/null | grep -E '^EXPLAIN_(NODE_RANK|NUM_NODES)=' |
      sed -E 's/pid [0-9]+/pid P/' | sort | uniq -c | awk '{$1 = $1; print}' | tr '\n' ';')
expect_eq "salloc -N2 mpiexec.hydra -n 4: node index and count explained by the proxies' srun step" "$got" \
    "2 EXPLAIN_NODE_RANK=SLURM_NODEID=0 of the Hydra proxy's srun step (the proxy, pid P = SLURM_TASK_PID, hydra_pmi_proxy --launcher slurm --proxy-id -1, takes its node index from it);2 EXPLAIN_NODE_RANK=SLURM_NODEID=1 of the Hydra proxy's srun step (the proxy, pid P = SLURM_TASK_PID, hydra_pmi_proxy --launcher slurm --proxy-id -1, takes its node index from it);4 EXPLAIN_NUM_NODES=SLURM_STEP_NUM_NODES=2 of the Hydra proxies' srun step (one proxy a node: SLURM_STEP_NUM_TASKS=2);"

# The master without -genv MASTER_ADDR: the proxies' step's first host,
# where proxy 0 runs rank 0, on every rank alike (-hosts n1:3,n0:1 lists n1
# first, yet n0 runs ranks 0-2), read by amldist_init and exported by
# amlrun per process and per node.
for hosts in "-n 4" "-hosts n1:3,n0:1 -n 4"; do
    rm -f "$VIEW"/*
    # shellcheck disable=SC2016,SC2086
    hy $hosts -- sh -c '"$1" --explain >"$0.$PMI_RANK"' "$VIEW/m" "$HELLO" >/dev/null
    got=$(cat "$VIEW"/m.* 2>/dev/null | grep -E '^(MASTER_ADDR|EXPLAIN_MASTER_ADDR)=' | sort | uniq -c | awk '{$1 = $1; print}' | tr '\n' ';')
    expect_eq "salloc -N2 mpiexec.hydra $hosts, no MASTER_ADDR: amldist_init names rank 0's host on every rank" "$got" \
        "4 EXPLAIN_MASTER_ADDR=first host of SLURM_STEP_NODELIST=n[0-1], the Hydra proxies' srun step: SLURM_NODEID=0 there is proxy 0, which runs rank 0;4 MASTER_ADDR=n0;"
done
# shellcheck disable=SC2086
got=$(hy -hosts n1:3,n0:1 -n 4 -genv MASTER_PORT $PORT -- "$AMLRUN" "$REPORT" | by_rank | cut -d' ' -f1,2,7 | tr '\n' ';')
expect_eq "salloc -N2 mpiexec.hydra -hosts n1:3,n0:1 -n 4 amlrun, no MASTER_ADDR: every rank exports n0" "$got" \
    "n0 RANK=0 MASTER_ADDR=n0;n0 RANK=1 MASTER_ADDR=n0;n0 RANK=2 MASTER_ADDR=n0;n1 RANK=3 MASTER_ADDR=n0;"
out=$(hy -n 2 -ppn 1 -genv MASTER_PORT $PORT -- "$AMLRUN" --nproc-per-node 2 "$REPORT")
expect_eq "salloc -N2 mpiexec.hydra -n 2 -ppn 1 amlrun --nproc-per-node 2, no MASTER_ADDR: every worker's master is n0" \
    "$(grep -E '^n[0-9] RANK=' <<<"$out" | cut -d' ' -f7 | sort | uniq -c | awk '{$1 = $1; print}')" "4 MASTER_ADDR=n0"

# Per node: one amlrun a node, and amlruns split 3+1 (one numbering, one
# node count on every worker: GROUP_WORLD_SIZE).
# shellcheck disable=SC2016
W='echo "$(hostname) RANK=$RANK NODE=${NODE_RANK-} NODES=${GROUP_WORLD_SIZE-} LOCAL=$LOCAL_RANK/$LOCAL_WORLD_SIZE WORLD=$WORLD_SIZE"'
per_node() {
    local name=$1 want=$2
    shift 2
    local out
    out=$(hy "$@" $M -- "$AMLRUN" --nproc-per-node 2 sh -c "$W")
    expect_eq "$name" "$(grep -E '^n[0-9] RANK=' <<<"$out" | sort -t= -k2,2n | tr '\n' ';')" "$want"
    [ "$(grep -cE '^n[0-9] RANK=' <<<"$out")" -gt 0 ] || diag "stderr: $(tail -c 800 "$TEST_TMP/err")"
}
per_node "salloc -N2 mpiexec.hydra -n 2 -ppn 1 amlrun --nproc-per-node 2: one amlrun a node" \
    "n0 RANK=0 NODE=0 NODES=2 LOCAL=0/2 WORLD=4;n0 RANK=1 NODE=0 NODES=2 LOCAL=1/2 WORLD=4;n1 RANK=2 NODE=1 NODES=2 LOCAL=0/2 WORLD=4;n1 RANK=3 NODE=1 NODES=2 LOCAL=1/2 WORLD=4;" \
    -n 2 -ppn 1
per_node "salloc -N2 mpiexec.hydra -hosts n0:3,n1:1 -n 4 amlrun --nproc-per-node 2: 3+1, one numbering" \
    "$(for r in 0 1 2 3 4 5; do printf 'n0 RANK=%s NODE=0 NODES=2 LOCAL=%s/6 WORLD=8;' $r $r; done)n1 RANK=6 NODE=1 NODES=2 LOCAL=0/2 WORLD=8;n1 RANK=7 NODE=1 NODES=2 LOCAL=1/2 WORLD=8;" \
    -hosts n0:3,n1:1 -n 4

# The DDP jobs at two ranks, and at one worker an amlrun: their layouts at
# four ranks and two workers an amlrun are checked above, three ways; what
# DDP adds is that torch takes them (6 workers importing torch, not 12: a
# second of CPU each).
if have_torch torch.distributed; then
    dir=$TEST_TMP/ddp
    mkdir -p "$dir"
    # No MASTER_ADDR given: the proxies' step names rank 0's host.
    hy -n 2 -genv MASTER_PORT $PORT -genv DDP_OUT "$dir/pp" -- "$AMLRUN" --python "$TORCH_PY" "$TOP/tests/amlrun/ddp_replicas.py" >/dev/null
    got=$(cat "$dir"/pp.* 2>/dev/null | sort -t= -k2,2n | tr '\n' ';')
    expect_eq "salloc -N2 mpiexec.hydra -n 2 amlrun: DDP (gloo) trains, node and master from the proxies' step" "$got" \
        "n0 rank=0/2 node=0 agree=True trained=True;n1 rank=1/2 node=1 agree=True trained=True;"
    [ -n "$got" ] || diag "stderr: $(tail -c 1500 "$TEST_TMP/err")"
    hy -hosts n0:3,n1:1 -n 4 $M -genv DDP_OUT "$dir/pn" -- "$AMLRUN" --nproc-per-node 1 \
        --python "$TORCH_PY" "$TOP/tests/amlrun/ddp_replicas.py" >/dev/null
    got=$(cat "$dir"/pn.* 2>/dev/null | sed -E 's/^(n[0-9]) rank=[0-9]+\/4 node=([0-9]) agree=True trained=True$/\1 \2/' |
          sort | uniq -c | awk '{$1 = $1; print}' | tr '\n' ';')
    expect_eq "salloc -N2 mpiexec.hydra -hosts n0:3,n1:1 -n 4 amlrun --nproc-per-node 1: DDP trains on 4 ranks" "$got" "3 n0 0;1 n1 1;"
    [ "$got" = "3 n0 0;1 n1 1;" ] || diag "stderr: $(tail -c 1500 "$TEST_TMP/err")"
else
    skip "hydra under Slurm: DDP" "$TORCH_PY cannot import torch"
fi

expect_eq "no process left on any node" "$(slurm_leftovers)" ""
