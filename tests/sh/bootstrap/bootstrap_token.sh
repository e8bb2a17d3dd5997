#!/usr/bin/env bash
# The per-launch job token: when one amlrun starts every rank (one node, or
# head-node mode through mpirun), it exports a random AMLDIST_JOB_TOKEN, so a
# HELLO replayed from an earlier run carries another token and is refused
# (the refusal itself is test_bootstrap_exchange's test_wrong_token).  A
# user's token is kept; several nodes' own amlruns cannot share a secret and
# export none.
. "$(dirname "$0")/../../lib.sh"
show() { "$AMLRUN" "$@" --cpu-bind none --no-python sh -c 'echo "$RANK ${AMLDIST_JOB_TOKEN:-none}"' 2>/dev/null | sort; }

a=$(show --nproc-per-node 2)
b=$(show --nproc-per-node 2)
expect_eq "one node: both ranks get the same token" "$(echo "$a" | awk '{ print $2 }' | sort -u | wc -l)" 1
check "one node: 128 random bits in hex" sh -c 'echo "$0" | grep -Eq "^0 [0-9a-f]{32}$"' "$(echo "$a" | head -1)"
check "one node: another launch, another token" test "$(echo "$a" | head -1)" != "$(echo "$b" | head -1)"
expect_eq "a user's AMLDIST_JOB_TOKEN is kept" \
    "$(AMLDIST_JOB_TOKEN=mine show --nproc-per-node 2 | awk '{ print $2 }' | sort -u)" mine
expect_eq "several nodes' own amlruns: no token of their own" \
    "$(show --no-node-check --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --nproc-per-node 1)" "0 none"
check "--dry-run makes none" sh -c '! "$0" --nproc-per-node 1 --dry-run true 2>&1 | grep -q AMLDIST_JOB_TOKEN' "$AMLRUN"

if have mpirun; then
    echo "localhost slots=1" >"$TEST_TMP/hosts"
    h=$(timeout 60 "$AMLRUN" --hostfile "$TEST_TMP/hosts" --nproc-per-node 2 --cpu-bind none --no-python \
        sh -c 'echo "$RANK ${AMLDIST_JOB_TOKEN:-none}"' 2>/dev/null | sort)
    check "head-node mode: the token reaches the ranks through mpirun" \
        sh -c 'echo "$0" | grep -Eq "^1 [0-9a-f]{32}$"' "$(echo "$h" | tail -1)"
    expect_eq "head-node mode: one token for the job" "$(echo "$h" | awk '{ print $2 }' | sort -u | wc -l)" 1
else
    skip "head-node mode token" "no mpirun"
fi

# The whole path: a bootstrap under the per-launch token works.
out=$("$AMLRUN" --nproc-per-node 3 --master-port $((20000 + RANDOM % 10000)) --cpu-bind none "$BUILD/examples/bootstrap_hello" 2>&1)
expect_eq "bootstrap under the per-launch token: exit 0" "$?" 0
diag "$(echo "$out" | head -3)"
