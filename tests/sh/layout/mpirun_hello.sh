#!/usr/bin/env bash
# Real mpirun (Debian's Open MPI) runs examples/hello and examples/mpi_hello:
# ranks 0..N-1, the world size, local ranks and node 0 on this one host,
# mapped by slot and round robin by node, from the OMPI_* variables and from
# the PMIx server alone.
. "$(dirname "$0")/../../lib.sh"
HELLO=$BUILD/examples/hello
MPI_HELLO=$BUILD/examples/mpi_hello
if ! have mpirun; then skip "mpirun hello" "mpirun not installed"; exit 0; fi
if [ ! -x "$HELLO" ]; then fail "mpirun hello: $HELLO not built"; exit 0; fi

# values KEY FILE: the sorted values of KEY=... lines, space separated.
values() { sed -n "s/^$1=//p" "$2" | sort -n | tr '\n' ' ' | sed 's/ $//'; }

hide_ompi="env -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE \
-u OMPI_COMM_WORLD_LOCAL_RANK -u OMPI_COMM_WORLD_LOCAL_SIZE"

for map in slot node; do
    for via in ompi pmix; do
        out=$TEST_TMP/hello-$map-$via
        wrap=; [ $via = pmix ] && wrap=$hide_ompi
        if ! pmix_run "$out" timeout 120 $MPIRUN -np 4 --map-by $map $wrap \
            "$HELLO" --explain; then
            fail "mpirun -np 4 --map-by $map hello ($via): exit status"
            sed 's/^/# /' "$out.err" | tail -20
            continue
        fi
        t="mpirun -np 4 --map-by $map hello ($via)"
        expect_eq "$t: ranks" "$(values RANK "$out")" "0 1 2 3"
        expect_eq "$t: world size" "$(values WORLD_SIZE "$out")" "4 4 4 4"
        expect_eq "$t: local ranks" "$(values LOCAL_RANK "$out")" "0 1 2 3"
        expect_eq "$t: local world" "$(values LOCAL_WORLD_SIZE "$out")" "4 4 4 4"
        expect_eq "$t: node rank" "$(values NODE_RANK "$out")" "0 0 0 0"
        expect_eq "$t: node count" "$(values NUM_NODES "$out")" "1 1 1 1"
        expect_eq "$t: source" "$(values SOURCE "$out" | tr -s ' ' '\n' | sort -u)" "$via"
    done
done
# With PMIx the node index comes from the server, and says so.
if grep -q '^EXPLAIN_NODE_RANK=PMIx PMIX_HOSTNAME=.* is entry 0 of the job.s PMIX_NODE_LIST$' "$TEST_TMP/hello-node-pmix"; then
    ok "hello (pmix): node rank explained by PMIX_NODE_LIST"
else
    fail "hello (pmix): node rank explained by PMIX_NODE_LIST"
    grep EXPLAIN_NODE "$TEST_TMP/hello-node-pmix" | sed 's/^/# /'
fi

# Azure ML on one node: the seed's single-node master and port.
out=$TEST_TMP/azure
timeout 120 $MPIRUN -np 2 -x AZ_BATCHAI_MPI_MASTER_NODE=10.0.0.5 \
    -x AZ_BATCH_MASTER_NODE=10.0.0.4:6000 "$HELLO" >"$out" 2>&1
expect_eq "mpirun hello (Azure ML one node): MASTER_ADDR" \
    "$(values MASTER_ADDR "$out")" "10.0.0.5 10.0.0.5"
expect_eq "mpirun hello (Azure ML one node): MASTER_PORT" \
    "$(values MASTER_PORT "$out")" "54965 54965"

if [ ! -x "$MPI_HELLO" ]; then
    skip "mpi_hello" "mpicc not available, examples/mpi_hello not built"
    exit 0
fi
# The library's answer and MPI's, in one program; the PMIx query before
# MPI_Init (and after it, and before an exec) must leave MPI working.
for mode in "--via-pmix" "--via-pmix --late" "--exec" ""; do
    for map in slot node; do
        out=$TEST_TMP/mpi_hello
        t="mpirun -np 4 --map-by $map mpi_hello $mode"
        if ! pmix_run "$out" timeout 120 $MPIRUN -np 4 --map-by $map \
            "$MPI_HELLO" $mode; then
            fail "$t: exit status"; sed 's/^/# /' "$out.err" | tail -20; continue
        fi
        agree=$(awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
                       if (v["RANK"] != v["MPI_RANK"] || v["WORLD_SIZE"] != v["MPI_SIZE"] ||
                           v["MPI_SUM"] != 4 || v["NODE_RANK"] != 0) bad++ ; n++ }
                     END { print n + 0, bad + 0 }' "$out")
        expect_eq "$t: 4 ranks agree with MPI" "$agree" "4 0"
    done
done
