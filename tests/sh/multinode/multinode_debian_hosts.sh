#!/usr/bin/env bash
# Issue 38: a c10d job on nodes with Debian's stock /etc/hosts, whose
# "127.0.1.1 <hostname>" line comes before the cluster's address of the
# same name.  Node 0's agent, on the host's machine, reaches the endpoint
# n0:PORT over loopback; the master address the other nodes' workers get
# must still be one they can reach (n0's 10.x, the address node 1 reached
# the host at), never 127.0.0.1, and a loopback MASTER_ADDR that an option
# forces is refused on node 1 before any worker starts, with the fix named,
# never a silent wait of PyTorch's 30 minutes.
# amldist-test: slow (a real 2x2 DDP job on the namespace cluster)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
if ! have_torch torch.distributed; then
    skip "multi-node c10d with Debian's hosts file" "$TORCH_PY cannot import torch"
    exit 0
fi
MULTINODE_TIMEOUT=${MULTINODE_TIMEOUT:-90}
multinode_setup 2

# Debian's installer writes "127.0.1.1 <hostname>" beside localhost; the
# cluster's own lines (every node's address) follow, as a cluster's
# /etc/hosts does.  `ip netns exec` bind-mounts each node's file.
for i in 0 1; do
    f=/etc/netns/$CLUSTER-n$i/hosts
    { printf '127.0.0.1\tlocalhost\n127.0.1.1\tn%s\n' "$i"; grep -v localhost "$f"; } >"$f.new"
    mv "$f.new" "$f"
done
got=$(on n0 getent ahostsv4 n0 | awk 'NR == 1 { print $1 }')
expect_eq "n0 resolves its own name to Debian's 127.0.1.1 first" "$got" 127.0.1.1

# The workers say their MASTER_ADDR, then train (tests/amlrun/ddp_replicas.py).
cat >"$TEST_TMP/ddp.py" <<'PY'
import os, runpy, socket, sys
print(f"{socket.gethostname()} MASTER_ADDR={os.environ['MASTER_ADDR']}", flush=True)
runpy.run_path(sys.argv[1], run_name="__main__")
PY
DDP=$TOP/tests/amlrun/ddp_replicas.py

# c10d NAME OUT NODE0-ARGS...: the same c10d line on both nodes (node 0's
# extra options first), each node's output in OUT.0 / OUT.1, statuses in
# RC0 / RC1; the environment's GLOO_SOCKET_IFNAME (below) reaches the
# workers of both.
c10d() {
    local name=$1 out=$2
    shift 2
    on n0 $T "$AMLRUN" --nnodes 2 --nproc-per-node 2 --rdzv-backend c10d \
        --rdzv-endpoint "n0:$PORT" --rdzv-id "$name" "$@" --python "$TORCH_PY" \
        "$TEST_TMP/ddp.py" "$DDP" >"$out.0" 2>&1 &
    local p0=$!
    on n1 $T "$AMLRUN" --nnodes 2 --nproc-per-node 2 --rdzv-backend c10d \
        --rdzv-endpoint "n0:$PORT" --rdzv-id "$name" --python "$TORCH_PY" \
        "$TEST_TMP/ddp.py" "$DDP" >"$out.1" 2>&1
    RC1=$?
    wait "$p0"
    RC0=$?
    PORT=$((PORT + 1))
}

# Gloo picks the address its own ranks listen on by resolving the host
# name, which MASTER_ADDR does not govern: with Debian's line it is
# 127.0.1.1 under any launcher, and GLOO_SOCKET_IFNAME is the user's fix
# (PyTorch's docs).  With it the job must run; without it, it must fail at
# once in Gloo's words (connect [127.0.1.1]), not wait at the store.
start=$SECONDS
GLOO_SOCKET_IFNAME=eth0 c10d plain "$TEST_TMP/a"
if [ "$RC0/$RC1" = 0/0 ]; then ok "a 2x2 DDP job with --rdzv-endpoint n0:PORT exits 0 on both nodes"
else
    fail "a 2x2 DDP job with --rdzv-endpoint n0:PORT exits 0 on both nodes (n0: $RC0, n1: $RC1; 124: it hung)"
    diag "n0: $(cat "$TEST_TMP/a.0")"
    diag "n1: $(cat "$TEST_TMP/a.1")"
fi
expect_eq "every worker's MASTER_ADDR is n0's cluster address" \
    "$(cat "$TEST_TMP/a.0" "$TEST_TMP/a.1" | grep -E '^n[01] MASTER_ADDR=' | sort | uniq -c | tr -s ' ')" \
    " 2 n0 MASTER_ADDR=$(node_addr n0)
 2 n1 MASTER_ADDR=$(node_addr n0)"
expect_eq "the replicas trained and agree" \
    "$(cat "$TEST_TMP/a.0" "$TEST_TMP/a.1" | grep -cE '^n[01] rank=[0-3]/4 node=[01] agree=True trained=True')" 4

c10d nogloo "$TEST_TMP/g"
if [ "$RC0" != 124 ] && [ "$RC1" != 124 ] &&
    grep -q "^n1 MASTER_ADDR=$(node_addr n0)\$" "$TEST_TMP/g.1"; then
    ok "without GLOO_SOCKET_IFNAME: MASTER_ADDR is n0's, the job ends ($RC0, $RC1) without a hang"
else
    fail "without GLOO_SOCKET_IFNAME: MASTER_ADDR is n0's, the job ends (n0: $RC0, n1: $RC1; 124: it hung)"
    diag "n1: $(cat "$TEST_TMP/g.1")"
fi

# A loopback master address an option forces (the host's --master-addr,
# node 0's --local-addr): node 1 reached the host over the network, so its
# workers could never reach it; refused there before any worker starts, and
# the whole job ends at once with that reason.
for opt in "--master-addr 127.0.0.1" "--local-addr 127.0.0.1"; do
    # shellcheck disable=SC2086
    c10d "loop${opt%% *}" "$TEST_TMP/b" $opt
    # (what ended it, not how soon: node 1's refusal, no timeout of any
    # kind waited out)
    if [ "$RC1" != 0 ] && [ "$RC1" != 124 ] && [ "$RC0" != 0 ] && [ "$RC0" != 124 ] &&
        ! grep -Eqi "timed out|no heartbeat|join timeout|needed joined" "$TEST_TMP/b.0" "$TEST_TMP/b.1"; then
        ok "$opt on node 0: both nodes fail on node 1's refusal ($RC0, $RC1), no hang, no timeout"
    else
        fail "$opt on node 0: both nodes fail on node 1's refusal (n0: $RC0, n1: $RC1; 124: it hung)"
        diag "n0: $(cat "$TEST_TMP/b.0")"
        diag "n1: $(cat "$TEST_TMP/b.1")"
    fi
    check "$opt: node 1 names MASTER_ADDR, the address it reached and the fix" \
        grep -q "MASTER_ADDR=127.0.0.1 .*loopback.*$(node_addr n0).*--master-addr.*--local-addr" "$TEST_TMP/b.1"
    check "$opt: node 1 started no worker" \
        bash -c "! grep -qE '^n1 MASTER_ADDR=' '$TEST_TMP/b.1'"
    check "$opt: node 0 says why the job ended" grep -q "loopback" "$TEST_TMP/b.0"
done
diag "n1 said: $(grep -h loopback "$TEST_TMP/b.1" | head -1)"
diag "n0 said: $(grep -h loopback "$TEST_TMP/b.0" | head -1)"
diag "took $((SECONDS - start)) s"

expect_eq "no process left on any node" "$(leftovers)" ""
