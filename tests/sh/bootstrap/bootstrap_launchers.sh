#!/usr/bin/env bash
# amldist_bootstrap_bcast() under real launchers (mpirun, amlrun): every rank
# gets rank 0's line; a rank with another job token is refused at once; a rank
# 0 that never serves makes the others fail with the timeout error naming the
# address, within the configured time.
. "$(dirname "$0")/../../lib.sh"
HELLO=$BUILD/examples/bootstrap_hello
if [ ! -x "$HELLO" ]; then fail "bootstrap_hello is built"; exit 0; fi

free_port() {
    "$TORCH_PY" -c 'import socket
for _ in range(50):
    a = socket.socket(); a.bind(("127.0.0.1", 0)); p = a.getsockname()[1]
    b = socket.socket()
    try: b.bind(("127.0.0.1", p + 1))
    except OSError: continue
    print(p); break'
}

# same_hello NAME FILE N: N lines, ranks 0..N-1, all naming one rank-0 pid
same_hello() {
    local pids ranks
    pids=$(sed -n 's/^rank [0-9]*\/[0-9]* got: hello from rank 0 (pid \([0-9]*\) on .*)$/\1/p' "$2" | sort -u)
    ranks=$(sed -n 's/^rank \([0-9]*\)\/'"$3"' got: .*/\1/p' "$2" | sort -n | tr '\n' ' ')
    expect_eq "$1: every rank got rank 0's line" "$ranks" "$(seq -s ' ' 0 $(($3 - 1))) "
    expect_eq "$1: one rank-0 pid in all lines" "$(printf '%s\n' "$pids" | grep -c .)" 1
}

if have mpirun; then
    port=$(free_port)
    MASTER_PORT=$port $MPIRUN -x MASTER_PORT -np 6 "$HELLO" >"$TEST_TMP/mpi.out" 2>"$TEST_TMP/mpi.err"
    expect_eq "mpirun -np 6: exit status" "$?" 0
    same_hello "mpirun -np 6" "$TEST_TMP/mpi.out" 6

    # Rank 1 carries another token (the job's secret): rank 0 does not
    # prove rank 1's, which gives up at once; rank 0 times out naming rank 1.
    port=$(free_port)
    MASTER_PORT=$port AMLDIST_BOOTSTRAP_TIMEOUT=3 timeout 60 $MPIRUN -x MASTER_PORT -x AMLDIST_BOOTSTRAP_TIMEOUT -np 2 \
        sh -c 'AMLDIST_JOB_TOKEN=job-$OMPI_COMM_WORLD_RANK-0123456789abcdef0123456789abcdef "$0"; echo "rank $OMPI_COMM_WORLD_RANK exit $?"' "$HELLO" \
        >"$TEST_TMP/tok.out" 2>"$TEST_TMP/tok.err"
    # (Each rank's status is printed, so that mpirun does not abort the job
    # at the first failure before rank 0 has timed out.)
    expect_eq "token mismatch: both ranks fail" \
        "$(grep -c '^rank [01] exit 1$' "$TEST_TMP/tok.out")" 2
    check "token mismatch: rank 1 is refused (EDENIED)" \
        grep -q "rank 1: the endpoint 127.0.0.1:$((port + 1)) did not prove the job's secret (the job token from AMLDIST_JOB_TOKEN).*(AMLDIST_EDENIED)" "$TEST_TMP/tok.err"
    check "token mismatch: rank 0 says rank 1 never came" \
        grep -q "rank 0: 1 of 1 ranks did not fetch .* within 3 s (missing: 1)" "$TEST_TMP/tok.err"

    # Rank 0 never serves (it is `sleep`): ranks 1..3 time out after 1.5 s,
    # and say so (what they waited for is checked, not how long the test saw
    # them take).
    port=$(free_port)
    MASTER_PORT=$port AMLDIST_BOOTSTRAP_TIMEOUT=1.5 timeout 60 $MPIRUN -x MASTER_PORT -x AMLDIST_BOOTSTRAP_TIMEOUT -np 4 \
        sh -c '[ "$OMPI_COMM_WORLD_RANK" = 0 ] && exec sleep 4; "$0"; echo "exit $?"' "$HELLO" \
        >"$TEST_TMP/dead.out" 2>"$TEST_TMP/dead.err"
    expect_eq "rank 0 absent: three ranks fail" "$(grep -c '^exit 1$' "$TEST_TMP/dead.out")" 3
    expect_eq "rank 0 absent: three ranks report the timeout" \
        "$(grep -c "rank [123]: no answer from 127.0.0.1:$((port + 1)) within 1.5 s (last error: connecting: Connection refused) (AMLDIST_ETIMEDOUT)" "$TEST_TMP/dead.err")" 3
else
    skip "bootstrap under mpirun" "mpirun not installed"
fi

if [ -x "$AMLRUN" ]; then
    port=$(free_port)
    MASTER_PORT=$port "$AMLRUN" --nproc-per-node 5 "$HELLO" >"$TEST_TMP/aml.out" 2>"$TEST_TMP/aml.err"
    expect_eq "amlrun --nproc-per-node 5: exit status" "$?" 0
    same_hello "amlrun --nproc-per-node 5" "$TEST_TMP/aml.out" 5
else
    fail "amlrun is built"
fi
