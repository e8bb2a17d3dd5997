#!/usr/bin/env bash
# What the channel of the control plane and the bootstrap costs (issue 21,
# lib/net/chan.c): a fresh process's first handshake (libcrypto's one-time
# set-up included), the job's keys, one handshake, one frame sealed and
# opened by size, and a frame's round trip over a socketpair through the
# framed connection, plain and sealed; microseconds, REPS runs each.
#     bench/chan.sh [REPS]
set -eu
cd "$(dirname "$0")/.."
reps=${1:-1000}
build=${BUILD:-build}
make -s BUILD="$build" "$build/bench/chan_bench" >/dev/null
"$build/bench/chan_bench" "$reps"
