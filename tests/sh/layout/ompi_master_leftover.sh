#!/usr/bin/env bash
# A leftover MASTER_ADDR / MASTER_PORT in mpirun's shell (issue 39).  Open
# MPI gives mpirun's environment to the ranks of its own node only and to
# the others what -x forwards, so the ranks of n0 alone would take it while
# n1's take the launcher's master: DDP hangs.  n0's ranks tell it from
# mpirun's command line (lib/sources/ompi_env.c) and refuse, naming the
# variables and the fixes; -x (or mca_base_env_list) forwards them, and
# AMLDIST_PREFER=launcher sets them aside: then every rank has one master.
# A value set after mpirun (a wrapper, on every node) is not a leftover.
# amldist_init in the rank, amlrun per process and per node.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
multinode_setup 2
HELLO=$BUILD/examples/hello
LEFT=(MASTER_ADDR=10.231.0.11 MASTER_PORT=$PORT)
# "count line" pairs of the RANK/WORLD_SIZE/MASTER lines, on one line.
tally() { grep -E '^(WORLD_SIZE|MASTER_ADDR|MASTER_PORT)=' | sort | uniq -c | awk '{$1=$1; print}' | tr '\n' ' '; }

out=$(on n0 env "${LEFT[@]}" $T $MPIRUN --mca orte_abort_on_non_zero_status 0 \
      --host n0:2,n1:2 -np 4 "$HELLO" 2>&1)
expect_eq "leftover MASTER_ADDR and MASTER_PORT: n0's two ranks refuse, naming both and the fixes" \
    "$(grep -c 'MASTER_ADDR MASTER_PORT are set on mpirun.s node only.*unset MASTER_ADDR MASTER_PORT there, forward them (mpirun -x MASTER_ADDR -x MASTER_PORT), or set AMLDIST_PREFER=launcher' <<<"$out")" 2
check "leftover MASTER_ADDR: no rank of n0 takes it" sh -c '! grep -q "^MASTER_ADDR=10.231.0.11$" <<EOT
$0
EOT' "$out"

out=$(on n0 env "${LEFT[@]}" $T $MPIRUN --host n0:2,n1:2 -np 4 -x MASTER_ADDR -x MASTER_PORT "$HELLO" 2>&1)
expect_eq "forwarded with -x: every rank has the one master" "$(tally <<<"$out")" \
    "4 MASTER_ADDR=10.231.0.11 4 MASTER_PORT=$PORT 4 WORLD_SIZE=4 "

# Open MPI 4.1 forwards no family: -x 'MASTER_*' is no -x MASTER_ADDR.
out=$(on n0 env "${LEFT[@]}" $T $MPIRUN --mca orte_abort_on_non_zero_status 0 \
      --host n0:2,n1:2 -np 4 -x 'MASTER_*' "$HELLO" 2>&1)
expect_eq "-x 'MASTER_*' (Open MPI forwards no family): n0's two ranks still refuse" \
    "$(grep -c 'MASTER_ADDR MASTER_PORT are set on mpirun.s node only' <<<"$out")" 2

# mca_base_env_list forwards MASTER_ADDR; MASTER_PORT alone is refused.
out=$(on n0 env "${LEFT[@]}" $T $MPIRUN --mca orte_abort_on_non_zero_status 0 \
      --host n0:2,n1:2 -np 4 --mca mca_base_env_list 'MASTER_ADDR;FOO=1' "$HELLO" 2>&1)
expect_eq "MASTER_ADDR forwarded by mca_base_env_list, MASTER_PORT not: n0's ranks name MASTER_PORT alone" \
    "$(grep -c 'MASTER_PORT is set on mpirun.s node only.*forward it (mpirun -x MASTER_PORT)' <<<"$out")" 2

out=$(on n0 env "${LEFT[@]}" AMLDIST_PREFER=launcher $T $MPIRUN --host n0:2,n1:2 -np 4 "$HELLO" 2>&1)
expect_eq "AMLDIST_PREFER=launcher: set aside, every rank takes mpirun's node and the default port" \
    "$(tally <<<"$out")" "4 MASTER_ADDR=10.231.0.10 4 MASTER_PORT=29500 4 WORLD_SIZE=4 "

# Set after mpirun, on every node alike (a wrapper script; launch.py):
# not mpirun's environment, so not a leftover, even beside one.
# shellcheck disable=SC2016
out=$(on n0 env MASTER_ADDR=10.231.0.12 $T $MPIRUN --host n0:2,n1:2 -np 4 sh -c \
      'export MASTER_ADDR=10.231.0.11 MASTER_PORT=$1; exec "$0"' "$HELLO" "$PORT" 2>&1)
expect_eq "set by a wrapper on every node (beside a leftover of another value): accepted, one master" \
    "$(tally <<<"$out")" "4 MASTER_ADDR=10.231.0.11 4 MASTER_PORT=$PORT 4 WORLD_SIZE=4 "

# One node: every rank has mpirun's environment, nothing to split.
out=$(on n0 env "${LEFT[@]}" $T $MPIRUN --host n0:2 -np 2 "$HELLO" 2>&1)
expect_eq "one node: the leftover is every rank's" "$(tally <<<"$out")" \
    "2 MASTER_ADDR=10.231.0.11 2 MASTER_PORT=$PORT 2 WORLD_SIZE=2 "

# amlrun per process: n0's amlruns refuse before any exec (every rank
# ends on its own, so both refusals are there to count).
out=$(on n0 env "${LEFT[@]}" $T $MPIRUN --mca orte_abort_on_non_zero_status 0 \
      --host n0:2,n1:2 -np 4 "$AMLRUN" "$REPORT" 2>&1)
expect_eq "amlrun per process: n0's two amlruns name the leftovers" \
    "$(grep -c '^amlrun: .*MASTER_ADDR MASTER_PORT are set on mpirun.s node only' <<<"$out")" 2
expect_eq "amlrun per process: no worker of n0 runs" "$(grep -c '^n0 RANK=' <<<"$out")" 0

# amlrun per node: n0's amlrun refuses at once and mpirun ends the job.
rc=0
out=$(on n0 env "${LEFT[@]}" $T $MPIRUN --host n0,n1 --npernode 1 --bind-to none \
      "$AMLRUN" --nproc-per-node 2 "$REPORT" 2>&1) || rc=$?
check "amlrun per node: the job fails" test "$rc" != 0
check "amlrun per node: n0's amlrun names the leftovers and the fix" \
    grep -q "^amlrun: .*MASTER_ADDR MASTER_PORT are set on mpirun.s node only.*AMLDIST_PREFER=launcher" <<<"$out"
expect_eq "amlrun per node: no worker runs" "$(grep -c '^n[0-9] RANK=' <<<"$out")" 0

expect_eq "no process left on any node" "$(leftovers)" ""
