#!/usr/bin/env bash
# The node rank under Open MPI across namespace nodes, by slot and by node,
# with mpirun on a node that runs ranks and on a head node that runs none
# (n0 with --host n1,n2: the host namespace cannot reach the nodes, so n0
# plays the head node).  libamldist reads it from the rank's daemon number
# (OMPI_MCA_orte_local_daemon_uri, OMPI_MCA_ess_base_num_procs,
# OMPI_MCA_orte_num_nodes), never from PMIx in amlrun's per-process mode:
# each worker is amlrun exec'ing a shell that prints its host and then execs
# mpi_hello in the same process, whose MPI_Init and allreduce must succeed.
# amldist-test: slow (one of the longest: tests/run.sh starts it early)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
multinode_setup 3

HELLO=$BUILD/examples/mpi_hello
if [ ! -x "$HELLO" ]; then
    skip "ompi node rank" "$HELLO not built (needs mpicc)"
    exit 0
fi
WORKER=$TEST_TMP/worker.sh
cat >"$WORKER" <<EOF
#!/bin/sh
printf 'HOST %s RANK=%s NODE_RANK=%s\n' "\$(hostname)" "\${RANK-}" "\${NODE_RANK-unset}"
exec "$HELLO"
EOF
chmod +x "$WORKER"

# run ARGS...: mpirun on n0 with ARGS, amlrun per process; one line per
# rank, in rank order: "HOST RANK=r NODE_RANK=n MPI_RANK=r MPI_SUM=world".
run() {
    on n0 $T $MPIRUN "$@" "$AMLRUN" "$WORKER" 2>"$TEST_TMP/err" |
        awk '$1 == "HOST" { split($3, a, "="); host[a[2]] = $2 " " $3 " " $4 }
             /^RANK=/ { split($1, a, "="); r = a[2]
                        for (i = 1; i <= NF; i++)
                            if ($i ~ /^MPI_(RANK|SUM)=/) mpi[r] = mpi[r] " " $i }
             END { for (r in host) print host[r] mpi[r] }' | sort -t= -k2,2n
}

# want WORLD HOST:NODE... (one per rank, in rank order)
want() {
    local world=$1 r=0 spec
    shift
    for spec in "$@"; do
        printf '%s RANK=%s NODE_RANK=%s MPI_RANK=%s MPI_SUM=%s\n' \
            "${spec%%:*}" "$r" "${spec#*:}" "$r" "$world"
        r=$((r + 1))
    done
}

case_eq() {
    local name=$1 got=$2 exp=$3
    expect_eq "$name" "$got" "$exp"
    [ "$got" = "$exp" ] || diag "stderr: $(head -c 600 "$TEST_TMP/err")"
}

# mpirun inside n0, two nodes.
case_eq "mpirun on n0 --host n0:2,n1:2 (by slot)" \
    "$(run --host n0:2,n1:2)" "$(want 4 n0:0 n0:0 n1:1 n1:1)"
case_eq "mpirun on n0 --host n0:2,n1:2 --map-by node" \
    "$(run --host n0:2,n1:2 --map-by node)" "$(want 4 n0:0 n1:1 n0:0 n1:1)"
# Three nodes.
case_eq "mpirun on n0 --host n0:2,n1:2,n2:2 (by slot)" \
    "$(run --host n0:2,n1:2,n2:2)" "$(want 6 n0:0 n0:0 n1:1 n1:1 n2:2 n2:2)"
case_eq "mpirun on n0 --host n0:2,n1:2,n2:2 --map-by node" \
    "$(run --host n0:2,n1:2,n2:2 --map-by node)" "$(want 6 n0:0 n1:1 n2:2 n0:0 n1:1 n2:2)"

# Head node: mpirun on n0, ranks on n1 and n2 only.  With --novm only
# mpirun's daemon can be idle, so every node is known.
case_eq "head node --host n1:2,n2:2 --novm (by slot)" \
    "$(run --host n1:2,n2:2 --novm)" "$(want 4 n1:0 n1:0 n2:1 n2:1)"
case_eq "head node --host n1:2,n2:2 --novm --map-by node" \
    "$(run --host n1:2,n2:2 --novm --map-by node)" "$(want 4 n1:0 n2:1 n1:0 n2:1)"
# Without --novm, n1's ranks see exactly what they would see if n0 ran ranks
# and n2 were an unused host: unknown, never a guess.  n2, the last daemon,
# can only be the last node.  MPI still works: amlrun did not ask PMIx.
case_eq "head node --host n1:2,n2:2: n1 unknown, n2 node 1, MPI_Init works" \
    "$(run --host n1:2,n2:2 --map-by node)" "$(want 4 n1:unset n2:1 n1:unset n2:1)"
got=$(on n0 $T $MPIRUN --host n1:2,n2:2 -x AMLDIST_NO_PMIX=1 "$BUILD/examples/hello" --explain |
      grep '^EXPLAIN_NODE_RANK=unknown' | sort -u)
expect_eq "head node: the unknown node rank says why" "$got" \
    "EXPLAIN_NODE_RANK=unknown: daemon 1 of OMPI_MCA_ess_base_num_procs=3 for 2 nodes: 1 idle may lie below it (mpirun --novm tells); PMIx: PMIx query disabled (AMLDIST_NO_PMIX)"
# The same for an unused --host entry (n2 gets no rank of -np 4).
case_eq "--host n0:2,n1:2,n2:2 -np 4: n2 idle, n1 unknown" \
    "$(run --host n0:2,n1:2,n2:2 -np 4)" "$(want 4 n0:0 n0:0 n1:unset n1:unset)"

# A program that does not exec may ask PMIx: its node index is its host's
# place in PMIX_NODE_LIST (PMIX_NODEID is the daemon number, 1 and 2 here).
pmix_run "$TEST_TMP/hello" on n0 $T $MPIRUN --host n1:2,n2:2 --map-by node \
    "$BUILD/examples/hello" --explain
got=$(grep '^EXPLAIN_NODE_RANK=' "$TEST_TMP/hello" | sort | uniq -c |
      awk '{$1 = $1; print}' | tr '\n' ';')
expect_eq "head node, in-process PMIx query: node index from PMIX_NODE_LIST" "$got" \
    "2 EXPLAIN_NODE_RANK=PMIx PMIX_HOSTNAME=n1 is entry 0 of the job's PMIX_NODE_LIST;2 EXPLAIN_NODE_RANK=derived: daemon 2 (OMPI_MCA_orte_local_daemon_uri) of OMPI_MCA_ess_base_num_procs=3 for OMPI_MCA_orte_num_nodes=2;"

expect_eq "no process left on any node" "$(leftovers)" ""
