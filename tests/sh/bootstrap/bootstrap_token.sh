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
    "$(AMLDIST_JOB_TOKEN=mine-0123456789abcdef0123456789abcdef show --nproc-per-node 2 | awk '{ print $2 }' | sort -u)" \
    mine-0123456789abcdef0123456789abcdef
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

# Issue 38: no libcrypto (a minimal container, an OpenSSL 1.1 system):
# amlrun's own token of one node (marked AMLDIST_JOB_TOKEN_ORIGIN) needs
# none, nothing of it crossing a network; a user's secret still does, and
# says so.  libcrypto.so.3 hidden in a mount namespace: an empty file bound
# over every copy the loader knows.
mark=$("$AMLRUN" --nproc-per-node 1 --cpu-bind none --no-python \
    sh -c 'echo "${AMLDIST_JOB_TOKEN_ORIGIN:-none}"' 2>/dev/null)
expect_eq "one node: amlrun marks its own token" "$mark" amlrun-one-node
expect_eq "a user's token: no mark" "$(AMLDIST_JOB_TOKEN=0123456789abcdef0123456789abcdef \
    "$AMLRUN" --nproc-per-node 1 --cpu-bind none --no-python sh -c 'echo "${AMLDIST_JOB_TOKEN_ORIGIN:-none}"' 2>/dev/null)" none
libs=$(ldconfig -p | awk '/libcrypto\.so\.3 / { print $NF }' | sort -u | xargs -r readlink -f | sort -u)
if [ -n "$libs" ] && unshare -m true 2>/dev/null; then
    : >"$TEST_TMP/empty.so"
    nocrypto() {
        unshare -m sh -c 'for l in $LIBS; do mount --bind "$E" "$l" || exit 99; done; exec "$@"' sh "$@"
    }
    export LIBS=$libs E=$TEST_TMP/empty.so
    port=$((20000 + RANDOM % 10000))
    out=$(nocrypto "$AMLRUN" --nproc-per-node 2 --master-port "$port" --cpu-bind none \
        "$BUILD/examples/bootstrap_hello" 2>&1)
    rc=$?
    [ "$rc" = 99 ] && fail "no libcrypto: the bind mount failed"
    expect_eq "no libcrypto: one node under amlrun's own token: exit 0" "$rc" 0
    check "no libcrypto: no word of a secret" sh -c '! echo "$0" | grep -q "has a secret"' "$out"
    out=$(AMLDIST_JOB_TOKEN=0123456789abcdef0123456789abcdef nocrypto "$AMLRUN" --nproc-per-node 2 \
        --master-port "$((port + 10))" --cpu-bind none "$BUILD/examples/bootstrap_hello" 2>&1)
    check "no libcrypto: a user's secret still needs it, and says so" \
        sh -c 'echo "$0" | grep -q "the job has a secret, and OpenSSL 3"' "$out"
    unset LIBS E
else
    skip "no libcrypto" "no libcrypto.so.3 known to ldconfig, or unshare -m is not allowed here"
fi
