#!/usr/bin/env bash
# Every benchmark still builds and runs (bench/all.sh --smoke: the smallest
# sizes), so that `make bench` can regenerate the README's figures.  No
# figure is checked: timings are not assertions.
# amldist-test: slow (one of the longest: tests/run.sh starts it early)
. "$(dirname "$0")/../../lib.sh"
for name in $(sed -n 's/^\([a-z_]*\)|.*/\1/p' "$TOP/bench/all.sh"); do
    if [ ! -f "$TOP/bench/$name.sh" ]; then
        fail "bench/$name.sh exists"
        continue
    fi
    if BUILD=$BUILD "$TOP/bench/all.sh" --smoke "$name" >"$TEST_TMP/$name.out" 2>&1; then
        ok "bench/$name.sh runs at its smallest size"
    else
        fail "bench/$name.sh runs at its smallest size"
        tail -n 20 "$TEST_TMP/$name.out" | sed 's/^/# /'
    fi
done
# Every bench/*.sh is one of them (a new one must be added to bench/all.sh).
for f in "$TOP"/bench/*.sh; do
    name=$(basename "$f" .sh)
    [ "$name" = all ] && continue
    check "bench/$name.sh is in bench/all.sh" grep -q "^$name|" "$TOP/bench/all.sh"
done
