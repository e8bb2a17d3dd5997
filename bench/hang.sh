#!/usr/bin/env bash
# Hangs (issue 20): how soon amlrun --hang-timeout finds one, and how long
# the stacks of many ranks on one node take to read and merge.
#   1. detection: RUNS jobs of 2 ranks that each print one line (with the
#      time it was written) and then sleep; the delay from that line to the
#      "hang" record of --event-log, against SEC (the promise: SEC + 1 s).
#   2. stacks: RANKS native ranks (tests/amlrun/stuck.c, one in a C loop,
#      the others in pause(2)) and RANKS Python ranks (time.sleep), hung
#      with --hang-timeout 1: from the "hang" record to the "stop" record,
#      i.e. every rank's stack captured, merged, printed and written as
#      JSON (the goal: 2 s for 64 ranks).
#   3. the option's cost at launch: `amlrun --nproc-per-node 8 /bin/true`
#      with and without --hang-timeout 600 (hyperfine, RUNS runs).
#   usage: bench/hang.sh [RUNS] [SEC] [RANKS]     (defaults 5 2 64)
set -eu
cd "$(dirname "$0")/.."
RUNS=${1:-5}
SEC=${2:-2}
RANKS=${3:-64}
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
AMLRUN=${AMLRUN:-$BUILD/bin/amlrun}
PY=${PY:-/usr/bin/python3}
export OMP_NUM_THREADS=1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/amlrun-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
# ev_ts FILE EVENT: the "ts" of the first EVENT record of an event log
ev_ts() { grep -m1 "\"event\": \"$2\"" "$1" | sed 's/.*"ts": \([0-9.]*\).*/\1/'; }

# 1. detection
for i in $(seq "$RUNS"); do
    rm -f "$tmp/ev"
    "$AMLRUN" --hang-timeout "$SEC" --event-log "$tmp/ev" --nproc-per-node 2 --no-python \
        sh -c 'echo "up $(date +%s.%N)"; exec sleep 600' >"$tmp/out" 2>/dev/null || true
    last=$(sed -n 's/^up //p' "$tmp/out" | sort -n | tail -n 1)
    echo "$(ev_ts "$tmp/ev" hang) $last" | awk '{printf "%.3f\n", $1 - $2}'
done >"$tmp/delays"
echo "# detection, --hang-timeout $SEC, $RUNS runs: from the last line to the hang," \
    "median $(median <"$tmp/delays") s, max $(sort -n "$tmp/delays" | tail -n 1) s" \
    "(promise: $SEC + 1 s)"

# 2. the stacks of RANKS ranks
cc -g -O0 -o "$tmp/stuck" tests/amlrun/stuck.c
cat >"$tmp/sleeper.py" <<'PY'
import os, sys, time
d, n = sys.argv[1], int(sys.argv[2])
open(f"{d}/ready.{os.environ['RANK']}", "w").close()
while len([f for f in os.listdir(d) if f.startswith("ready.")]) < n:
    print("starting", flush=True)  # a slow start is not a hang
    time.sleep(0.2)
while True:
    time.sleep(1)
PY
for kind in native python; do
    rm -f "$tmp/ev" "$tmp/r.json" "$tmp"/ready.*
    if [ "$kind" = native ]; then
        cmd=(--no-python "$tmp/stuck" spin 3 "$tmp")
    else
        cmd=("$tmp/sleeper.py" "$tmp" "$RANKS")
    fi
    start=$(date +%s.%N)
    AMLRUN_PYTHON=$PY "$AMLRUN" --hang-timeout 1 --hang-report "$tmp/r.json" --event-log "$tmp/ev" \
        --nproc-per-node "$RANKS" "${cmd[@]}" >/dev/null 2>"$tmp/err" || true
    end=$(date +%s.%N)
    got=$("$PY" -c 'import json, sys; r = json.load(open(sys.argv[1])); print(len(r["ranks"]), sum(1 for x in r["ranks"] if x["threads"]))' "$tmp/r.json")
    echo "# stacks of $RANKS $kind ranks: $(echo "$(ev_ts "$tmp/ev" stop) $(ev_ts "$tmp/ev" hang)" |
        awk '{printf "%.3f", $1 - $2}') s to capture, merge, print and write them" \
        "(ranks in the report, with stacks: $got; the whole job $(echo "$end $start" | awk '{printf "%.1f", $1 - $2}') s)"
    grep -m1 'no progress for .*; stacks of' "$tmp/err" | sed 's/^/#   /'
done

# 3. the option's cost at launch
if command -v hyperfine >/dev/null; then
    hyperfine -N --style none --warmup 1 --runs "$RUNS" --export-json "$tmp/l.json" \
        -n plain "$AMLRUN --nproc-per-node 8 /bin/true" \
        -n hang "$AMLRUN --nproc-per-node 8 --hang-timeout 600 /bin/true" >/dev/null 2>&1
    "$PY" -c 'import json, sys
m = {r["command"]: r["median"] * 1e3 for r in json.load(open(sys.argv[1]))["results"]}
print("# launch of 8x /bin/true, median of %s: %.1f ms plain, %.1f ms with --hang-timeout 600" % (sys.argv[2], m["plain"], m["hang"]))' "$tmp/l.json" "$RUNS"
fi
