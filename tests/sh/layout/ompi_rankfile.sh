#!/usr/bin/env bash
# Open MPI with a rankfile (mpirun -rf) across 2 and 3 namespace nodes, with
# rank 0 away from mpirun's node and with mpirun on a node that runs no rank.
# Open MPI 4's daemons away from mpirun export OMPI_MCA_orte_num_nodes (and
# PMIx PMIX_NUM_NODES) at twice the node count there, and the nodes follow
# the rankfile, not the daemons: the layout must come from the rankfile
# itself (OMPI_MCA_orte_rankfile), the same on every rank.  Checked three
# ways against what the rankfile says: where Open MPI really put each rank
# and what its PMIx server says (the launcher), what amlrun gives its
# command, what amldist_init derives in the rank.
# amldist-test: slow (one of the longest: tests/run.sh starts it early)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
multinode_setup 3
HELLO=$BUILD/examples/hello
REPORT=$TOP/tests/amlrun/report.sh

# A rank that reports what amldist_init derives, in report.sh's words.
LIBREPORT=$TEST_TMP/libreport.sh
cat >"$LIBREPORT" <<EOF
#!/bin/sh
out=\$("$HELLO") || exit 1
for v in RANK LOCAL_RANK NODE_RANK WORLD_SIZE LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT; do
    eval "\$v=\\\$(printf '%s\\n' \"\\\$out\" | sed -n \"s/^\$v=//p\")"
    export "\$v"
done
exec "$REPORT"
EOF
chmod +x "$LIBREPORT"

# rankfile NAME HOST...: a rankfile placing rank i on the i-th HOST, slots
# counted per host.
rankfile() {
    local f=$TEST_TMP/$1 r=0 h
    shift
    : >"$f"
    declare -A slot=()
    for h in "$@"; do
        printf 'rank %d=%s slot=%d\n' "$r" "$h" "${slot[$h]:-0}" >>"$f"
        slot[$h]=$(( ${slot[$h]:-0} + 1 ))
        r=$((r + 1))
    done
    echo "$f"
}

# expected RANKFILE: report.sh's line for each rank, from the file alone:
# nodes in the order of their first rank, the master rank 0's host.
expected() {
    awk -F'[ =]+' '
        $1 == "rank" { host[$2] = $3; n++ }
        END {
            for (r = 0; r < n; r++) {
                h = host[r]
                if (!(h in node)) node[h] = nodes++
                local[r] = size[h]++
            }
            for (r = 0; r < n; r++)
                printf "%s RANK=%d LOCAL_RANK=%d NODE_RANK=%d WORLD_SIZE=%d LOCAL_WORLD_SIZE=%d MASTER_ADDR=%s MASTER_PORT=29500\n",
                    host[r], r, local[r], node[host[r]], n, size[host[r]], host[0]
        }' "$1"
}

# ranks_of CMD...: mpirun's ranks' report lines in rank order.
ranks_of() { on n0 $T $MPIRUN "$@" 2>"$TEST_TMP/err" | grep -E '^n[0-9] RANK=' | sort -t= -k2,2n; }

# case NAME RANKFILE: the three ways.
case_rf() {
    local name=$1 rf=$2 np want got
    np=$(grep -c '^rank' "$rf")
    want=$(expected "$rf")
    got=$(ranks_of -rf "$rf" -np "$np" sh -c 'echo "$(hostname) RANK=$OMPI_COMM_WORLD_RANK"')
    expect_eq "$name: Open MPI places every rank as the rankfile says" \
        "$got" "$(awk '{print $1, $2}' <<<"$want")"
    got=$(ranks_of -rf "$rf" -np "$np" -x AMLDIST_NO_PMIX=1 "$LIBREPORT")
    expect_eq "$name: amldist_init, from the rankfile" "$got" "$want"
    [ "$got" = "$want" ] || diag "stderr: $(head -c 600 "$TEST_TMP/err")"
    got=$(ranks_of -rf "$rf" -np "$np" "$AMLRUN" "$REPORT")
    expect_eq "$name: amlrun exports the rankfile's layout" "$got" "$want"
    [ "$got" = "$want" ] || diag "stderr: $(head -c 600 "$TEST_TMP/err")"
    # Where the rankfile cannot be read (no shared file system), the PMIx
    # server: its node list, not its node count, which is doubled too.
    got=$(ranks_of -rf "$rf" -np "$np" sh -c \
        'OMPI_MCA_orte_rankfile=/nonexistent/rankfile; export OMPI_MCA_orte_rankfile; exec "$0"' "$LIBREPORT")
    expect_eq "$name: rankfile unreadable: amldist_init asks PMIx, the same layout" "$got" "$want"
}

case_rf "2 nodes, mpirun on n0" "$(rankfile rf2 n0 n0 n1 n1)"
case_rf "3 nodes, mpirun on n0 (ERANGE before)" "$(rankfile rf3 n0 n0 n1 n1 n2 n2)"
case_rf "2 nodes, rank 0 on n1, mpirun on n0" "$(rankfile rf10 n1 n1 n0 n0)"
case_rf "mpirun on n0, ranks on n1 and n2 only" "$(rankfile rf12 n1 n1 n2 n2)"
case_rf "3 nodes interleaved" "$(rankfile rfi n2 n0 n1 n2 n0 n1)"

# The same file given as an MCA parameter (--mca rmaps_rank_file_path, which
# Open MPI exports as OMPI_MCA_rmaps_rank_file_path, not orte_rankfile).
rf=$TEST_TMP/rf10
got=$(ranks_of --mca rmaps_rank_file_path "$rf" -np 4 "$AMLRUN" "$REPORT")
expect_eq "--mca rmaps_rank_file_path, rank 0 on n1: amlrun exports the file's layout" \
    "$got" "$(expected "$rf")"

# amlrun per node under a rankfile, rank 0 on n1: the workers of outer rank
# r are ranks 2r and 2r + 1 on its host, as in a rankfile that placed them.
rf=$(rankfile rfpn n1 n0)
want=$(expected "$(rankfile rfpn-workers n1 n1 n0 n0)")
got=$(ranks_of -rf "$rf" -np 2 --bind-to none "$AMLRUN" --nproc-per-node 2 "$REPORT")
expect_eq "one amlrun per node, rank 0 on n1: the workers' layout" "$got" "$want"

# The same rankfile unreadable on every rank and no PMIx (amlrun): the same
# unknowns everywhere, never the daemons' numbers.
rf=$TEST_TMP/rf3
got=$(on n0 $T $MPIRUN -rf "$rf" -np 6 -x AMLDIST_NO_PMIX=1 sh -c \
    'OMPI_MCA_orte_rankfile=/nonexistent/rankfile; export OMPI_MCA_orte_rankfile; exec "$0" --explain' "$HELLO" |
      grep -E '^(NODE_RANK|NUM_NODES|MASTER_ADDR)=' | sort | uniq -c | awk '{$1 = $1; print}' | tr '\n' ';')
expect_eq "rankfile unreadable, no PMIx: every rank says unknown" "$got" \
    "6 MASTER_ADDR=unknown;6 NODE_RANK=unknown;6 NUM_NODES=unknown;"

# amlrun reads the rankfile without a PMIx connection: MPI_Init still works
# in the program it execs (mpi_hello's allreduce over the 4 ranks).
MPIHELLO=$BUILD/examples/mpi_hello
if [ -x "$MPIHELLO" ]; then
    got=$(on n0 $T $MPIRUN -rf "$TEST_TMP/rf10" -np 4 "$AMLRUN" "$MPIHELLO" 2>"$TEST_TMP/err" |
          grep -o 'MPI_SUM=[0-9]*' | sort | uniq -c | awk '{$1 = $1; print}')
    expect_eq "rank 0 on n1: MPI_Init works under amlrun" "$got" "4 MPI_SUM=4"
else
    skip "rankfile: MPI_Init under amlrun" "$MPIHELLO not built (needs mpicc)"
fi

expect_eq "no process left on any node" "$(leftovers)" ""
