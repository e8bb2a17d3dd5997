#!/usr/bin/env bash
# MPICH 4's mpiexec.hydra (issue 11), for real: amlrun per process and per
# node, on this host and on two nodes of the namespace cluster (Hydra's ssh
# launcher through scripts/ompi-rsh-agent).  The node index comes from the
# rank's Hydra proxy (hydra_pmi_proxy --proxy-id), never from PMI_FD: an MPI
# program that amlrun execs (examples/mpi_hello built with MPICH's mpicc)
# must still MPI_Init.  Without a proxy in sight, the node rank is left out
# and amlrun says so.  Open MPI stays the default mpirun.
. "$(dirname "$0")/../../lib.sh"
stdin_without_end # mpiexec.hydra (tests/lib.sh)
if ! have mpiexec.hydra; then
    skip "hydra" "mpiexec.hydra not installed (Debian package mpich)"
    exit 0
fi
if [ ! -x "$AMLRUN" ]; then fail "hydra: $AMLRUN is built"; exit 0; fi
T="timeout -k 5 60"
REPORT=$TOP/tests/amlrun/report.sh
H=$(hostname)
# Report lines with the host name replaced by "h", sorted by rank.
rows() { grep -E ' RANK=' | sed 's/^[^ ]* /h /' | sort -t= -k2,2n; }
# want_rows LWS NODE MASTER PORT RANK:LOCAL_RANK...
want_rows() {
    local lws=$1 node=$2 master=$3 port=$4 spec
    shift 4
    for spec in "$@"; do
        printf 'h RANK=%s LOCAL_RANK=%s NODE_RANK=%s WORLD_SIZE=4 LOCAL_WORLD_SIZE=%s MASTER_ADDR=%s MASTER_PORT=%s\n' \
            "${spec%%:*}" "${spec#*:}" "$node" "$lws" "$master" "$port"
    done
}

# Open MPI is still the default mpirun / mpiexec / mpicc.
for p in mpirun mpiexec; do
    expect_eq "$p is still Open MPI's beside MPICH" "$(readlink -f "$(command -v $p)")" \
        "$(readlink -f /usr/bin/$p.openmpi)"
done
check "mpicc is still Open MPI's" sh -c 'mpicc --showme:version 2>&1 | grep -q "Open MPI"'

# ---- one host ---------------------------------------------------------------
got=$($T mpiexec.hydra -n 4 "$AMLRUN" "$REPORT" 2>"$TEST_TMP/err" | rows)
expect_eq "mpiexec.hydra -n 4 amlrun: per process on one host" "$got" \
    "$(want_rows 4 0 127.0.0.1 29500 0:0 1:1 2:2 3:3)"
# Four ranks on this machine's cores share them: local rank 0's amlrun says
# once that OMP_NUM_THREADS is 1, as torchrun does; nothing else is said.
expect_eq "mpiexec.hydra -n 4 amlrun: no warning" \
    "$(grep -v -e 'usable cores' -e '^amlrun: OMP_NUM_THREADS not set: using 1' "$TEST_TMP/err")" ""
# Two amlruns share this host: they split it, 2 workers each.
got=$($T mpiexec.hydra -n 2 -ppn 1 "$AMLRUN" --nproc-per-node 2 "$REPORT" 2>"$TEST_TMP/err" | rows)
expect_eq "mpiexec.hydra -n 2 -ppn 1 amlrun --nproc-per-node 2: one host" "$got" \
    "$(want_rows 4 0 127.0.0.1 29500 0:0 1:1 2:2 3:3)"

# An MPICH program in place of amlrun still initialises MPI, and agrees.
MPI_HELLO=$TEST_TMP/mpi_hello
agree() {
    awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
           if (v["RANK"] != v["MPI_RANK"] || v["WORLD_SIZE"] != v["MPI_SIZE"] ||
               v["MPI_SUM"] != 4) bad++; n++ }
         END { print n + 0, bad + 0 }'
}
if ! have mpicc.mpich; then
    skip "hydra: amlrun mpi_hello (MPICH)" "mpicc.mpich not installed (Debian package libmpich-dev)"
    MPI_HELLO=
elif ! mpicc.mpich -std=c11 -D_GNU_SOURCE -I"$TOP/include" -o "$MPI_HELLO" \
        "$TOP/examples/mpi_hello.c" -L"$BUILD/lib" -lamldist -Wl,-rpath,"$BUILD/lib" 2>"$TEST_TMP/cc"; then
    fail "hydra: build examples/mpi_hello with mpicc.mpich"; sed 's/^/# /' "$TEST_TMP/cc"
    MPI_HELLO=
else
    got=$($T mpiexec.hydra -n 4 "$AMLRUN" "$MPI_HELLO" 2>&1 | grep '^RANK=' | agree)
    expect_eq "mpiexec.hydra -n 4 amlrun mpi_hello: MPI_Init works, 4 ranks agree" "$got" "4 0"
fi

# No Hydra proxy in sight (the variables alone): never a guessed node index.
mpich_env="env -i PATH=$PATH PMI_RANK=1 PMI_SIZE=4 PMI_FD=99 MPI_LOCALRANKID=1 MPI_LOCALNRANKS=2 MASTER_ADDR=127.0.0.1"
# (--no-node-check: this one amlrun plays one of the job's four alone)
$mpich_env $T "$AMLRUN" --no-node-check --nproc-per-node 2 "$REPORT" >"$TEST_TMP/out" 2>"$TEST_TMP/err"
rc=$?
expect_eq "MPICH variables without a proxy, per node: runs, workers without NODE_RANK" \
    "$rc $(rows <"$TEST_TMP/out" | tr '\n' ';')" \
    "0 h RANK=2 LOCAL_RANK=2 NODE_RANK= WORLD_SIZE=8 LOCAL_WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500;h RANK=3 LOCAL_RANK=3 NODE_RANK= WORLD_SIZE=8 LOCAL_WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500;"
check "... and says the node rank cannot be known, and why" \
    grep -q "warning: the node rank is not known, the workers get no NODE_RANK or GROUP_RANK (unknown: MPICH .* no Hydra proxy" "$TEST_TMP/err"
got=$($mpich_env $T "$AMLRUN" "$REPORT" 2>"$TEST_TMP/err" | rows)
expect_eq "MPICH variables without a proxy, per process: runs without NODE_RANK" "$got" \
    "h RANK=1 LOCAL_RANK=1 NODE_RANK= WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500"
check "... and warns that it gets no NODE_RANK" \
    grep -q "warning: the node rank is not known, the command gets no NODE_RANK" "$TEST_TMP/err"

# ---- two nodes --------------------------------------------------------------
. "$TOP/tests/multinode.sh"
multinode_setup 2
HY="mpiexec.hydra -launcher ssh -launcher-exec $TOP/scripts/ompi-rsh-agent -hosts n0,n1"
N0=$(node_addr n0)
M="-genv MASTER_ADDR $N0 -genv MASTER_PORT $PORT"

# Per process, 2 ranks per node in blocks, and round robin (-ppn 1).
got=$(on n0 $T $HY $M -n 4 -ppn 2 "$AMLRUN" "$REPORT" | by_rank)
expect_eq "hydra -n 4 -ppn 2 amlrun on n0,n1: layout by block" "$got" \
    "$(want_layout "$N0" "$PORT" n0:0:0:0 n0:0:1:1 n1:1:2:0 n1:1:3:1)"
got=$(on n0 $T $HY $M -n 4 -ppn 1 "$AMLRUN" "$REPORT" | by_rank)
expect_eq "hydra -n 4 -ppn 1 amlrun on n0,n1: round robin, node rank from the proxy" "$got" \
    "$(want_layout "$N0" "$PORT" n0:0:0:0 n1:1:1:0 n0:0:2:1 n1:1:3:1)"
got=$(on n0 $T $HY -n 4 -ppn 1 "$BUILD/examples/hello" --explain 2>"$TEST_TMP/explain.err" |
      grep '^EXPLAIN_NODE_RANK=' |
      sed 's/ (pid [0-9]*,/ (pid P,/' | sort | uniq -c | awk '{$1 = $1; print}' | tr '\n' ';')
want="2 EXPLAIN_NODE_RANK=hydra_pmi_proxy --proxy-id 0 (pid P, the Hydra proxy that started this process);2 EXPLAIN_NODE_RANK=hydra_pmi_proxy --proxy-id 1 (pid P, the Hydra proxy that started this process);"
expect_eq "hydra: the node rank is explained by the proxy" "$got" "$want"
# Hydra's own words when it did not run (seen once under a loaded suite).
[ "$got" = "$want" ] || tail -n 20 "$TEST_TMP/explain.err" | sed 's/^/# hydra: /'

# Per node: one amlrun per node, two workers each.
got=$(on n0 $T $HY $M -n 2 -ppn 1 "$AMLRUN" --nproc-per-node 2 "$REPORT" | by_rank)
expect_eq "hydra -n 2 -ppn 1 amlrun --nproc-per-node 2 on n0,n1: layout" "$got" \
    "$(want_layout "$N0" "$PORT" n0:0:0:0 n0:0:1:1 n1:1:2:0 n1:1:3:1)"

# Hydra names no host of rank 0: without MASTER_ADDR per-process mode warns,
# per-node mode (whose amlruns must meet) stops before starting a worker.
on n0 $T $HY -n 4 -ppn 2 "$AMLRUN" "$REPORT" >"$TEST_TMP/out" 2>"$TEST_TMP/err"
expect_eq "hydra per process without MASTER_ADDR: 4 ranks run, MASTER_ADDR empty" \
    "$(by_rank <"$TEST_TMP/out" | grep -c 'MASTER_ADDR= ')" 4
check "... with a warning naming MASTER_ADDR" grep -q "warning: MASTER_ADDR is not known" "$TEST_TMP/err"
on n0 $T $HY -n 2 -ppn 1 "$AMLRUN" --nproc-per-node 2 "$REPORT" >"$TEST_TMP/out" 2>"$TEST_TMP/err"
expect_eq "hydra per node without MASTER_ADDR: no worker runs" "$(by_rank <"$TEST_TMP/out")" ""
check "... and the reason names MASTER_ADDR" grep -q "no worker started" "$TEST_TMP/err"

# An MPICH program across the nodes, started by amlrun: MPI and the layout.
if [ -n "$MPI_HELLO" ]; then
    out=$(on n0 $T $HY -n 4 -ppn 1 "$AMLRUN" "$MPI_HELLO" 2>&1)
    expect_eq "hydra -n 4 -ppn 1 amlrun mpi_hello on n0,n1: MPI_Init works, ranks agree" \
        "$(grep '^RANK=' <<<"$out" | agree)" "4 0"
    expect_eq "... node ranks by rank" \
        "$(grep '^RANK=' <<<"$out" | sed 's/^RANK=\([0-9]*\) .*NODE_RANK=\([0-9]*\) .*/\1:\2/' | sort -n | tr '\n' ' ')" \
        "0:0 1:1 2:0 3:1 "
fi

expect_eq "no process left on any node" "$(leftovers)" ""
