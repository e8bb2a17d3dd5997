#!/usr/bin/env bash
# amlrun --status and --stacks from any node cover every node: a 2-node job
# on the namespace cluster (static rendezvous, 2 ranks a node) asked from
# node 1 of its own amlrun, and from node 0: every rank of both nodes, on
# its node's host; the stacks of all 4 ranks, merged.  Then the job still
# ends well.
# amldist-test: slow
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
MULTINODE_TIMEOUT=90
multinode_setup 2

d=$TEST_TMP/st
mkdir -p "$d"
work="touch $d/up.\$RANK; while [ ! -e $d/stop ]; do sleep 0.1; done"
for n in 0 1; do
    on n$n $T "$AMLRUN" --run-id mnstat --nnodes 2 --node-rank $n --master-addr n0 \
        --master-port "$PORT" --nproc-per-node 2 --no-python sh -c "$work" \
        >"$d/out$n" 2>"$d/err$n" &
done
for _ in $(seq 600); do
    [ -e "$d/up.0" ] && [ -e "$d/up.1" ] && [ -e "$d/up.2" ] && [ -e "$d/up.3" ] && break
    sleep 0.1
done
want="0 n0
1 n0
2 n1
3 n1"

# The amlrun of node N (its pid, in the shared pid space).
amlrun_of() {
    local p
    for p in $(cluster_pids); do
        tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | grep -q "^$AMLRUN .*--node-rank $1 " && echo "$p"
    done | head -n 1
}
a0=$(amlrun_of 0)
a1=$(amlrun_of 1)

json_ranks() {
    "$TORCH_PY" -c 'import json,sys
j = json.load(sys.stdin)
hosts = {n["node"]: n["host"] for n in j.get("nodes", [])}
for r in sorted(j["ranks"], key=lambda r: r["rank"]):
    print(r["rank"], hosts.get(r.get("node"), "?") if r.get("pid", 0) > 0 else "no pid")'
}

on n1 $T "$AMLRUN" --status=json "$a1" >"$d/s1.json" 2>"$d/s1.err"
expect_eq "--status from node 1: exit 0" "$?" 0
expect_eq "--status from node 1: every rank of both nodes, on its host, with a pid" \
    "$(json_ranks <"$d/s1.json")" "$want"
on n0 $T "$AMLRUN" --status=json "$a0" >"$d/s0.json" 2>"$d/s0.err"
expect_eq "--status from node 0: every rank of both nodes, on its host, with a pid" \
    "$(json_ranks <"$d/s0.json")" "$want"
on n1 $T "$AMLRUN" --stacks "$a1" >"$d/k1.out" 2>&1
expect_eq "--stacks from node 1: exit 0" "$?" 0
check "--stacks from node 1: the stacks of the 4 ranks of both nodes" \
    grep -Eq "stacks of 4 ranks" "$d/k1.out"
if [ -n "${VERBOSE:-}" ]; then diag "$(cat "$d/s1.json" "$d/s1.err" "$d/k1.out" "$d/err0" "$d/err1")"; fi

touch "$d/stop"
wait
expect_eq "the job still ends well on both nodes" "$(grep -c 'exited 0' "$d/err0")" 1
expect_eq "no process left on any node" "$(leftovers)" ""
