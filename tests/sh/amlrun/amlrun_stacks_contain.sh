#!/usr/bin/env bash
# The stacks under every containment amlrun can choose, each forced
# (AMLDIST_TEST_CONTAIN: the job's cgroup, a PID namespace whose init is
# the guard, process groups only): a native rank stuck in a C loop is
# named by its frames in each; and a rank's child process (a shell's
# child) is read under its rank, its threads in the JSON with tid, pid and
# name (issue 37).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"

fresh() { rm -rf "$TEST_TMP/$1"; mkdir -p "$TEST_TMP/$1"; echo "$TEST_TMP/$1"; }

STUCK=$TEST_TMP/stuck
if ! cc -g -O0 -o "$STUCK" "$TOP/tests/amlrun/stuck.c"; then
    fail "tests/amlrun/stuck.c builds with cc -g"
    exit 0
fi

for mode in cgroup pidns pgroups; do
    d=$(fresh "contain_$mode")
    AMLDIST_TEST_CONTAIN=$mode "$AMLRUN" --hang-timeout 1 --nproc-per-node 2 \
        --no-python "$STUCK" spin 1 "$d" >"$d/out" 2>"$d/err"
    expect_eq "$mode: a hang, 124" "$?" 124
    check "$mode: rank 1 named by its loop" \
        grep -q "^amlrun:   rank 1[ (),a-z0-9.-]*: stuck.c:[0-9]* spin_forever" "$d/err"
    check "$mode: every rank has native frames" \
        sh -c "! grep -q 'no native frames' '$d/err'"
    grep -q spin_forever "$d/err" || sed 's/^/# stderr: /' "$d/err"
done

# --- a shell's child: read under the shell's rank
d=$(fresh child)
"$AMLRUN" --hang-timeout 1 --hang-report "$d/r.json" --nproc-per-node 1 \
    --no-python sh -c "'$STUCK' spin 0 '$d'; :" >"$d/out" 2>"$d/err"
expect_eq "a shell's child stuck: 124" "$?" 124
kid=$(cat "$d/pid.0" 2>/dev/null)
got=$("$TORCH_PY" - "$d/r.json" "$kid" <<'PY' 2>&1
import json, sys
r = json.load(open(sys.argv[1]))
kid = int(sys.argv[2])
(x,) = r["ranks"]
bad = []
if x["threads"][0]["pid"] != x["pid"] or x["threads"][0]["tid"] != x["pid"]:
    bad.append("the shell's main thread first")
mine = [t for t in x["threads"] if t["pid"] == kid]
if not mine or mine[0]["name"] != "stuck" or mine[0]["tid"] != kid:
    bad.append("the child's thread, its tid and name")
if not any(f["function"] == "spin_forever" for t in mine for f in t["native"]):
    bad.append("the child's frames")
print("; ".join(bad) or "ok")
PY
)
expect_eq "a shell's child: its thread and frames under the rank in the JSON" "$got" ok
