#!/usr/bin/env bash
# Leftover torchrun or amlrun variables in mpirun's shell (issue 39).  Open
# MPI gives mpirun's environment to the ranks of its own node only, so a
# leftover set reaches n0's ranks and not n1's.  A marked set (torchrun's
# TORCHELASTIC_RUN_ID / GROUP_RANK, amlrun's AMLDIST_LAUNCHER) is an inner
# launcher's only where its world is a multiple of the MPI world; a world
# of 1 beside OMPI_COMM_WORLD_SIZE=4 is refused, naming the variables and
# the fix, and AMLDIST_PREFER=launcher sets it aside.  With and without
# markers, amldist_init in the rank and amlrun per process and per node.
# Half a pair (a leftover WORLD_SIZE=4, mpirun -x RANK=7) names the same
# fixes, and AMLDIST_PREFER=launcher sets it aside.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
multinode_setup 2
HELLO=$BUILD/examples/hello
TORCHRUN_LEFT=(RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 GROUP_RANK=0 TORCHELASTIC_RUN_ID=none)
AMLRUN_LEFT=(AMLDIST_LAUNCHER=amlrun RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1)
PLAIN_LEFT=(RANK=0 WORLD_SIZE=1)

for set in TORCHRUN AMLRUN PLAIN; do
    declare -n left=${set}_LEFT
    out=$(on n0 env "${left[@]}" $T $MPIRUN --host n0:2,n1:2 -np 4 "$HELLO" 2>&1)
    case $set in
    PLAIN) want="WORLD_SIZE=1 conflicts with OMPI_COMM_WORLD_SIZE=4" ;;
    *) want="RANK=0 WORLD_SIZE=1 cannot be an inner launcher's inside OMPI_COMM_WORLD_SIZE=4" ;;
    esac
    check "$set leftovers: amldist_init on mpirun's node refuses ($want)" grep -q "$want" <<<"$out"
    check "$set leftovers: the refusal says how to clear them" \
        grep -q "unset RANK.* there, or set AMLDIST_PREFER=launcher" <<<"$out"
    check "$set leftovers: no rank is rank 0 of 1" test "$(grep -c '^WORLD_SIZE=1$' <<<"$out")" = 0
    out=$(on n0 env "${left[@]}" $T $MPIRUN --host n0:2,n1:2 -np 4 -x AMLDIST_PREFER=launcher "$HELLO" 2>&1)
    expect_eq "$set leftovers, AMLDIST_PREFER=launcher: the MPI world on every rank" \
        "$(grep -E '^(RANK|WORLD_SIZE)=' <<<"$out" | sort | uniq -c | awk '{$1=$1; print}' | tr '\n' ' ')" \
        "1 RANK=0 1 RANK=1 1 RANK=2 1 RANK=3 4 WORLD_SIZE=4 "
    # Per node: n0's amlrun refuses at once (not a job of its own), and
    # mpirun ends the job; n1's does not wait out its rendezvous.
    rc=0
    out=$(on n0 env "${left[@]}" $T $MPIRUN --host n0,n1 --npernode 1 --bind-to none \
          "$AMLRUN" --nproc-per-node 2 "$REPORT" 2>&1) || rc=$?
    check "$set leftovers, per node: the job fails" test "$rc" != 0
    check "$set leftovers, per node: n0's amlrun names the leftovers" \
        grep -q "${want%=4}=2.*unset RANK" <<<"$out"
    expect_eq "$set leftovers, per node: no worker runs a job of one" \
        "$(grep -c '^n[0-9] RANK=.* WORLD_SIZE=1 ' <<<"$out")" 0
    # (what ended it, not how soon: no rendezvous of n1's waited out)
    check "$set leftovers, per node: n1's amlrun did not wait out its rendezvous" \
        sh -c '! printf "%s\n" "$0" | grep -Eqi "timed out|needed joined|no heartbeat|join timeout"' "$out"
done
# Half a pair: a leftover WORLD_SIZE=4 alone in mpirun's shell (n0's ranks
# only), and RANK=7 passed with -x (every rank).  Refused naming the
# variable and the fixes; AMLDIST_PREFER=launcher sets it aside before the
# missing half is an error: the MPI world on every rank.
for c in shell:WORLD_SIZE x:RANK; do
    how=${c%%:*} var=${c#*:}
    if [ "$how" = shell ]; then pre=(env WORLD_SIZE=4) xs=(); n=2; else pre=() xs=(-x RANK=7); n=4; fi
    # Every rank ends on its own: mpirun does not kill the rest at the
    # first failure, so each refusal is there to count.
    out=$(on n0 ${pre[@]+"${pre[@]}"} $T $MPIRUN --mca orte_abort_on_non_zero_status 0 \
          --host n0:2,n1:2 -np 4 ${xs[@]+"${xs[@]}"} "$HELLO" 2>&1)
    expect_eq "$var ($how): amldist_init refuses on the $n ranks that have it, naming the fixes" \
        "$(grep -c "$var=[0-9]* is set but .* is not (set both, or unset it), beside OMPI_COMM_WORLD_SIZE=4.*unset $var there, or set AMLDIST_PREFER=launcher" <<<"$out")" "$n"
    out=$(on n0 ${pre[@]+"${pre[@]}"} $T $MPIRUN --host n0:2,n1:2 -np 4 ${xs[@]+"${xs[@]}"} -x AMLDIST_PREFER=launcher "$HELLO" 2>&1)
    expect_eq "$var ($how), AMLDIST_PREFER=launcher: the MPI world on every rank" \
        "$(grep -E '^(RANK|WORLD_SIZE)=' <<<"$out" | sort | uniq -c | awk '{$1=$1; print}' | tr '\n' ' ')" \
        "1 RANK=0 1 RANK=1 1 RANK=2 1 RANK=3 4 WORLD_SIZE=4 "
    out=$(on n0 ${pre[@]+"${pre[@]}"} $T $MPIRUN --host n0:2,n1:2 -np 4 ${xs[@]+"${xs[@]}"} -x AMLDIST_PREFER=launcher \
          -x MASTER_PORT=$PORT "$AMLRUN" "$REPORT" 2>&1)
    PORT=$((PORT + 3))
    expect_eq "$var ($how), AMLDIST_PREFER=launcher: amlrun per process exports the MPI world" \
        "$(by_rank <<<"$out" | cut -d' ' -f2,5 | tr '\n' ' ')" \
        "RANK=0 WORLD_SIZE=4 RANK=1 WORLD_SIZE=4 RANK=2 WORLD_SIZE=4 RANK=3 WORLD_SIZE=4 "
done

expect_eq "no process left on any node" "$(leftovers)" ""
