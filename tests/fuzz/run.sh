#!/usr/bin/env bash
# tests/fuzz/run.sh NAME SECONDS: build tests/fuzz/NAME.c with clang's libFuzzer
# (plus ASan+UBSan) against the library sources and run it for SECONDS.
set -eu
cd "$(dirname "$0")/../.."
name=$1 secs=$2
out=build-fuzz
mkdir -p "$out/corpus-$name"
clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=all -Iinclude -Ilib -Ilauncher \
    $(pkg-config --cflags hwloc libxml-2.0 libcrypto) \
    -o "$out/$name" "tests/fuzz/$name.c" lib/*/*.c \
    $(pkg-config --libs hwloc libxml-2.0 libcrypto) -ldl -lpthread
seed=tests/fuzz/corpus/$name
dirs=("$out/corpus-$name")
[ -d "$seed" ] && dirs+=("$seed")
if "$out/$name" -artifact_prefix="$out/" -max_total_time="$secs" -max_len=512 -timeout=10 "${dirs[@]}" >"$out/$name.log" 2>&1; then
    echo "ok - $name ran $secs s: $(grep -Eo '#[0-9]+[[:space:]]+DONE.*' "$out/$name.log" | tail -n 1)"
else
    tail -n 40 "$out/$name.log" >&2
    echo "not ok - $name found a crash (see $out/$name.log)"
    exit 1
fi
