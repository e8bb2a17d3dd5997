#!/bin/bash
# The pauses of a capture (issue 37): amlrun's loop, and a healthy rank's
# ptrace stop, while 64 ranks are read and one has a thread in D state.
#   BUILD=build-stk bash bench/stacks_capture.sh [N]
# Needs the build's launcher parts (make BUILD=... tests).
set -e
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
out=$BUILD/bench/stacks_capture
mkdir -p "$BUILD/bench"
cc -std=c11 -D_GNU_SOURCE -O2 -g -Iinclude -Ilib -Ilauncher -o "$out" \
    bench/stacks_capture.c "$BUILD/lib/libamlrun-parts.a" \
    "$BUILD/lib/libamldist.a" -ldl -lpthread
for i in 1 2 3; do "$out" "${1:-64}"; done
