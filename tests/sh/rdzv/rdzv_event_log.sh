#!/usr/bin/env bash
# --event-log on the nodes of a c10d job (namespace nodes, one amlrun
# each, each writing its own file; as rdzv_event_log@etcd, an etcd job): every line is JSON (parsed by python3's
# json), each node records the rendezvous rounds with its node rank and the
# job's size, the first round and the restart's; the failing node its
# failure, every node the restart and the other node's stop ("peer"), and
# the end with the job's status.
# amldist-test: etcd (also as rdzv_event_log@etcd: tests/amlrun/rdzv.sh's RZ_BACKEND)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
. "$TOP/tests/amlrun/rdzv.sh"
MULTINODE_TIMEOUT=120
rz_setup 2
EP=$(node_addr n0)
EV="$TORCH_PY $TOP/tests/amlrun/evcheck.py"

rz_case events
export RZ_FAIL=n1/1:7:all RZ_FAIL_ONCE=1 RZ_RUN=60 RZ_DONE=' restart=[1-9]'
for node in n0 n1; do
    rz_start "$node" --rdzv-backend c10d --rdzv-endpoint "$EP:$PORT" --nnodes 2 \
        --rdzv-conf "$RZ_FAST" --max-restarts 1 --nproc-per-node 2 \
        --event-log "$RZ_DIR/ev.$node" "$RZW"
done
rz_wait
name="$RZ_BACKEND, 2 nodes, one restart"
rz_expect "$name: every agent exits 0" "$(rz_rcs n0 n1)" "n0=0 n1=0"
for node in n0 n1; do
    got=$($EV "$RZ_DIR/ev.$node")
    check "$name: $node's log is whole JSON lines ($got)" test "${got#bad}" = "$got"
done
# summary NODE: what a dashboard would read of that node's events.
summary() {
    "$TORCH_PY" - "$RZ_DIR/ev.$1" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
kinds = [e["event"] for e in ev]
rdzv = [(e["round"], e["nnodes"], e["restarts"]) for e in ev if e["event"] == "rendezvous"]
nodes = {e["node"] for e in ev if e["event"] != "start"}
fail = [(e["local_rank"], e["exit_code"]) for e in ev if e["event"] == "failure"]
stop = [e["reason"] for e in ev if e["event"] == "stop"]
rest = [e["restarts"] for e in ev if e["event"] == "restart"]
ranks = sorted(e["rank"] for e in ev if e["event"] == "worker_start")
print("first=%s start_node=%s last=%s end_status=%s rounds=%s nodes=%s failures=%s "
      "stops=%s restarts=%s ranks=%s" % (kinds[0], ev[0]["node"], kinds[-1], ev[-1]["exit_code"],
      rdzv, sorted(nodes), fail, stop, rest, ranks))
PY
}
s0=$(summary n0) s1=$(summary n1)
diag "n0: $s0"
diag "n1: $s1"
n0_node=$(sed -n 's/.* nodes=\[\([01]\)\].*/\1/p' <<<"$s0")
n1_node=$(sed -n 's/.* nodes=\[\([01]\)\].*/\1/p' <<<"$s1")
expect_eq "$name: each node's events carry one node rank, the two differ" \
    "$(printf '%s\n' "$n0_node" "$n1_node" | sort | tr '\n' ' ')" "0 1 "
for node in n0 n1; do
    s=$(summary $node)
    check "$node: starts with start (node null: the rendezvous gives it), ends with end status 0" \
        grep -q "^first=start start_node=None last=end end_status=0 " <<<"$s"
    check "$node: two rendezvous rounds of 2 nodes, the second a restart" \
        grep -q " rounds=\[(0, 2, 0), (1, 2, 1)\] " <<<"$s"
    check "$node: one restart event (restart 1)" grep -q " restarts=\[1\] " <<<"$s"
done
check "n1: its failure (local rank 1, status 7)" grep -q " failures=\[(1, 7)\] " <<<"$s1"
check "n0: no failure of its own; stopped by its peer" \
    grep -q " failures=\[\] stops=\['peer'\] " <<<"$s0"
expect_eq "$name: worker_start events name every rank of both rounds" \
    "$(for n in n0 n1; do summary $n | sed 's/.* ranks=//'; done | tr -d '[],' | tr ' ' '\n' | sort -n | tr '\n' ' ')" \
    "0 0 1 1 2 2 3 3 "
no_leftovers "$name"
