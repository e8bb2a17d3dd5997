#!/usr/bin/env bash
# mpirun started on a node that runs no rank (n0, a login node outside
# --host n1,n2): one job, one answer for the master.  The variables name
# mpirun's node (OMPI_MCA_orte_hnp_uri), which runs no rank here, and a rank
# cannot tell from them whether it does: every rank asks the PMIx server for
# the host of rank 0 (a program that does not exec), or, where PMIx may not
# be asked (amlrun, AMLDIST_NO_PMIX), every rank gives the same reason and
# no master.  Checked against where Open MPI put rank 0 (the launcher), what
# amldist_init derives, and what amlrun exports or refuses.
# amldist-test: slow (one of the longest: tests/run.sh starts it early)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
multinode_setup 3
HELLO=$BUILD/examples/hello
REPORT=$TOP/tests/amlrun/report.sh

# rank0_host MPIRUN-OPTIONS...: the host Open MPI puts rank 0 on.  Every rank
# exits 0: when the others exited 1 (`[ rank = 0 ] && hostname`), mpirun
# aborted the job on the first of them, on a loaded machine before rank 0
# had printed.
# shellcheck disable=SC2016
rank0_host() { on n0 $T $MPIRUN "$@" sh -c '[ "$OMPI_COMM_WORLD_RANK" != 0 ] || hostname' 2>/dev/null; }
# field NAME: the values of NAME= over all ranks of the last run, counted.
counted() { grep -o "^$1=.*" | sort | uniq -c | awk '{$1 = $1; print}' | tr '\n' ';'; }

for layout in "--host n1:2,n2:2" "--host n1:2,n2:2 --map-by node" "--host n1:2,n2:2 --novm"; do
    # shellcheck disable=SC2086
    rank0=$(rank0_host $layout)
    check "$layout: Open MPI puts rank 0 on n1 or n2" test "$rank0" = n1 -o "$rank0" = n2
    # shellcheck disable=SC2086
    pmix_run "$TEST_TMP/hello" on n0 $T $MPIRUN $layout "$HELLO"
    got=$(counted MASTER_ADDR <"$TEST_TMP/hello")
    expect_eq "$layout: amldist_init with PMIx: every rank names rank 0's host" "$got" "4 MASTER_ADDR=$rank0;"
    # shellcheck disable=SC2086
    got=$(on n0 $T $MPIRUN $layout -x AMLDIST_NO_PMIX=1 "$HELLO" --explain 2>/dev/null |
          counted EXPLAIN_MASTER_ADDR)
    expect_eq "$layout: amldist_init without PMIx: the same reason on every rank" "$got" \
        "4 EXPLAIN_MASTER_ADDR=unknown: mpirun's node (OMPI_MCA_orte_hnp_uri) may run no rank, and then only the PMIx server knows the host of rank 0; give it: mpirun -x MASTER_ADDR=<rank 0's host> (or --master-addr);"
    # shellcheck disable=SC2086
    out=$(on n0 $T $MPIRUN $layout "$AMLRUN" "$REPORT" 2>&1)
    expect_eq "$layout: amlrun per process: no rank gets a MASTER_ADDR" \
        "$(grep -E '^n[0-9] RANK=' <<<"$out" | grep -o 'MASTER_ADDR=[^ ]*' | counted MASTER_ADDR)" "4 MASTER_ADDR=;"
    expect_eq "$layout: amlrun per process: every rank says why, alike" \
        "$(grep -c "warning: MASTER_ADDR is not known, workers will not get it (unknown: mpirun's node (OMPI_MCA_orte_hnp_uri) may run no rank" <<<"$out")" 4
done

# Per node (one amlrun on n1 and n2): the amlruns cannot meet without a
# master; both refuse alike and start nothing.  Each amlrun's exit waits
# for the other's: mpirun ends the job at the first non-zero exit, on a
# loaded machine before the other amlrun has said why.
B=$TEST_TMP/refused
mkdir -p "$B"
# shellcheck disable=SC2016
both='"$0" "$@"; s=$?; : >"$B/$OMPI_COMM_WORLD_RANK"
until [ -e "$B/0" ] && [ -e "$B/1" ]; do sleep 0.05; done; exit $s'
rc=0
out=$(on n0 $T $MPIRUN --host n1,n2 --npernode 1 --bind-to none -x B="$B" \
      sh -c "$both" "$AMLRUN" --nproc-per-node 2 "$REPORT" 2>&1) || rc=$?
check "per node: the job fails" test "$rc" != 0
expect_eq "per node: both amlruns refuse with the same reason" \
    "$(grep -c "cannot meet: MASTER_ADDR is not known (unknown: mpirun's node (OMPI_MCA_orte_hnp_uri) may run no rank" <<<"$out")" 2
expect_eq "per node: no worker started" "$(grep -c '^n[0-9] RANK=' <<<"$out")" 0

# Given a master (mpirun -x MASTER_ADDR), every rank and worker has it.
rank0=$(rank0_host --host n1:2,n2:2)
out=$(on n0 $T $MPIRUN --host n1:2,n2:2 -x MASTER_ADDR="$rank0" "$AMLRUN" "$REPORT" 2>&1)
expect_eq "-x MASTER_ADDR: every rank gets it" \
    "$(grep -E '^n[0-9] RANK=' <<<"$out" | grep -o 'MASTER_ADDR=[^ ]*' | counted MASTER_ADDR)" "4 MASTER_ADDR=$rank0;"
out=$(on n0 $T $MPIRUN --host n1,n2 --npernode 1 --bind-to none -x MASTER_ADDR="$rank0" \
      -x MASTER_PORT="$PORT" "$AMLRUN" --nproc-per-node 2 "$REPORT" 2>&1)
expect_eq "-x MASTER_ADDR, per node: the four workers run with it" \
    "$(grep -E '^n[0-9] RANK=' <<<"$out" | grep -o 'MASTER_ADDR=[^ ]*' | counted MASTER_ADDR)" "4 MASTER_ADDR=$rank0;"

expect_eq "no process left on any node" "$(leftovers)" ""
