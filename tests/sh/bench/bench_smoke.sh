#!/usr/bin/env bash
# Every benchmark still builds and runs: `make bench`'s bench/all.sh with
# --smoke (each at its smallest size), so that `make bench` can regenerate
# the README's figures.  No figure is checked: timings are not assertions.
# amldist-test: slow (one of the longest: tests/run.sh starts it early)
. "$(dirname "$0")/../../lib.sh"
out=$TEST_TMP/out
# (bench/rdzv_host.sh's TCPStore rows, Python and torch seconds a size,
# left out: the suite's time is the 2 CPUs')
TCPSTORE=0 BUILD=$BUILD "$TOP/bench/all.sh" --smoke >"$out" 2>&1
rc=$?
expect_eq "bench/all.sh --smoke: exit 0" "$rc" 0
for f in "$TOP"/bench/*.sh; do
    name=$(basename "$f" .sh)
    [ "$name" = all ] && continue
    if ! grep -q "^$name|" "$TOP/bench/all.sh"; then
        fail "bench/$name.sh is in bench/all.sh"
    elif grep -q "^## bench/$name.sh " "$out" && ! grep -q "^bench/$name.sh .* failed$" "$out"; then
        ok "bench/$name.sh runs at its smallest size"
    else
        fail "bench/$name.sh runs at its smallest size"
        sed -n "/^## bench\/$name.sh /,/^## /p" "$out" | tail -n 20 | sed 's/^/# /'
    fi
done
