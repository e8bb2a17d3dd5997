#!/usr/bin/env bash
# A PMIx_Init that never returns, as libpmix 4.2's does now and then under
# load (openpmix #2967), played by the stand-in libpmix
# (tests/standin/fake_pmix.c): a program that asks for its layout fails
# within AMLDIST_PMIX_TIMEOUT, says why, and exits although libpmix's call
# is still waiting on its thread.  The same program answers when the server
# does.
. "$(dirname "$0")/../../lib.sh"
FAKE=$BUILD/tests/standin/libfake_pmix.so
HELLO=$BUILD/examples/hello
for f in "$FAKE" "$HELLO"; do
    if [ ! -e "$f" ]; then fail "PMIx hang: $f not built"; exit 0; fi
done

# as_rank_2 MODE CMD...: CMD as rank 2 of the stand-in's job.
as_rank_2() {
    local mode=$1; shift
    env -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u SLURM_PROCID \
        -u RANK -u WORLD_SIZE PMIX_NAMESPACE=fake-job PMIX_RANK=2 \
        FAKE_PMIX="$mode" AMLDIST_PMIX_LIBRARY="$FAKE" \
        AMLDIST_PMIX_TIMEOUT=0.5 timeout 60 "$@"
}

out=$TEST_TMP/hang
as_rank_2 hang "$HELLO" --explain >"$out" 2>"$out.err"
expect_eq "hello, PMIx_Init never returns: exits 1 (not killed by timeout)" "$?" 1
check "hello, PMIx_Init never returns: the error names the call and the bound" \
    grep -q "PMIx_Init did not return within 0.500 s.*AMLDIST_PMIX_TIMEOUT" "$out.err"
check "hello, PMIx_Init never returns: the error names the variable left unknown" \
    grep -q "PMIX_RANK=2 is set but the world size is unknown" "$out.err"
check "hello, PMIx_Init never returns: no layout printed" test ! -s "$out"

out=$TEST_TMP/answer
as_rank_2 answer "$HELLO" >"$out" 2>"$out.err"
expect_eq "hello, PMIx answers: exit status" "$?" 0
expect_eq "hello, PMIx answers: the layout" \
    "$(grep -E '^(RANK|WORLD_SIZE|LOCAL_RANK|SOURCE)=' "$out" | tr '\n' ' ')" \
    "RANK=2 WORLD_SIZE=4 LOCAL_RANK=2 SOURCE=pmix "
