#!/usr/bin/env bash
# tests/fuzz/run.sh NAME SECONDS: build tests/fuzz/NAME.c with clang's libFuzzer
# (plus ASan+UBSan) against the library's objects (the Makefile's fuzz
# rules) and run it for SECONDS.
set -eu
cd "$(dirname "$0")/../.."
name=$1 secs=$2
out=build-fuzz
mkdir -p "$out/corpus-$name"
# (make builds the library's instrumented objects once for every target:
# tests/run.sh's job fuzz-build has made them all before the targets run)
make -s -j"$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null || echo 2)" "$out/$name" >&2
seed=tests/fuzz/corpus/$name
dirs=("$out/corpus-$name")
# What longer runs found (tests/fuzz/corpus.py): the run starts there.
[ -f "$seed.hex" ] && python3 tests/fuzz/corpus.py unpack "$seed.hex" "$out/corpus-$name"
[ -d "$seed" ] && dirs+=("$seed")
if "$out/$name" -artifact_prefix="$out/" -max_total_time="$secs" -max_len=512 -timeout=10 "${dirs[@]}" >"$out/$name.log" 2>&1; then
    echo "ok - $name ran $secs s: $(grep -Eo '#[0-9]+[[:space:]]+DONE.*' "$out/$name.log" | tail -n 1)"
else
    tail -n 40 "$out/$name.log" >&2
    echo "not ok - $name found a crash (see $out/$name.log)"
    exit 1
fi
