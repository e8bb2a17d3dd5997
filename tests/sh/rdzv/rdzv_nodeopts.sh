#!/usr/bin/env bash
# What one node's options ask of a c10d job, compared with the others'
# (issue 22).  A keepalive that differs from the host's is refused at JOIN
# naming both values (it was declared lost after the host's dead time, the
# job exiting 125 without a word); other timeouts that differ are the
# host's to decide, and the node says so.  A non-host node's --master-addr
# and --master-port are not used: it warns, naming what won and why.
# --local-addr (torchrun 2.x) names the node in the rendezvous: node 0's
# becomes MASTER_ADDR.  A round waiting for its last call says so.  As
# rdzv_nodeopts@etcd, the same on etcd, where the host is the decider's
# agent (the first started).
# amldist-test: etcd (also as rdzv_nodeopts@etcd: tests/amlrun/rdzv.sh's RZ_BACKEND)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
. "$TOP/tests/amlrun/rdzv.sh"
rz_setup 2
EP=$(node_addr n0)

# A worker that writes "HOST RANK MASTER_ADDR MASTER_PORT" to its record.
MW=$TEST_TMP/master_worker.sh
cat >"$MW" <<'EOF'
#!/bin/sh
echo "$(hostname) $RANK $MASTER_ADDR $MASTER_PORT" >"$RZ_DIR/m.$RANK"
EOF
chmod +x "$MW"
records() { cat "$RZ_DIR"/m.* 2>/dev/null | sort -k2,2n; }
masters() { records | awk '{ print $3 }' | sort -u | tr '\n' ' '; }

# node NODE PORT ARGS...: a c10d agent of a 2-node job on NODE.
node() {
    local n=$1 port=$2
    shift 2
    rz_start "$n" --rdzv-backend c10d --rdzv-endpoint "$EP:$port" --nnodes 2 \
        --nproc-per-node 1 --cpu-bind none "$@"
}

# --- keepalive: refused at JOIN, both values named -----------------------
rz_case keepalive
node n0 "$PORT" --rdzv-conf "$RZ_FAST,join_timeout=60" "$MW"
node n1 "$PORT" --rdzv-conf keep_alive_interval=30,keep_alive_max_attempt=8 "$MW"
rz_wait n1
expect_eq "keepalive 30 s against the host's 0.5 s: refused (exit 2)" "${RC[n1]}" 2
has "keepalive: the refusal names this node's values and the job's" \
    "$(cat "$RZ_DIR/n1.err")" \
    "keep_alive_interval=30,keep_alive_max_attempt=8 differ from the job's keep_alive_interval=0.5,keep_alive_max_attempt=8"
# The host's job is not harmed: a node with its values joins and it runs.
node n1 "$PORT" --rdzv-conf "$RZ_FAST,last_call_timeout=7" "$MW"
rz_wait n0 n1
expect_eq "keepalive: a node with the host's values then runs the job" \
    "$(rz_rcs n0 n1) $(records | wc -l)" "n0=0 n1=0 2"
# A last call that differs is the host's to decide: said, not refused.
has "last_call_timeout 7 against the host's 30: the host's applies, said" \
    "$(cat "$RZ_DIR/n1.err")" \
    "warning: this node's last_call_timeout=7 is not used: the rendezvous host's 30 applies"

# --- a non-host node's --master-addr/--master-port ------------------------
rz_case master
node n0 $((PORT + 10)) --rdzv-conf "$RZ_FAST" "$MW"
node n1 $((PORT + 10)) --rdzv-conf "$RZ_FAST" --master-addr bogus.example \
    --master-port 12345 "$MW"
rz_wait n0 n1
expect_eq "master options on node 1: the job runs" "$(rz_rcs n0 n1)" "n0=0 n1=0"
expect_eq "master options on node 1: MASTER_ADDR is node 0's address" "$(masters)" "$EP "
port=$(records | awk 'NR == 1 { print $4 }')
err1=$(cat "$RZ_DIR/n1.err")
has "master options on node 1: the address warning names both and why" "$err1" \
    "warning: this node's master address bogus.example is not used: MASTER_ADDR=$EP is node 0's address as the rendezvous host sees it"
has "master options on node 1: the port warning names both and why" "$err1" \
    "warning: this node's master port 12345 is not used: MASTER_PORT=$port is the free port node 0 picked"
has_no() { if ! grep -q "$3" <<<"$2"; then ok "$1"; else fail "$1"; diag "$2"; fi; }
has_no "master options on node 1: node 0 has nothing to warn of" \
    "$(cat "$RZ_DIR/n0.err")" "not used"

# --- --local-addr ----------------------------------------------------------
# A host name: node 0's is MASTER_ADDR on every node, node 1's is not.
rz_case localname
node n0 $((PORT + 20)) --rdzv-conf "$RZ_FAST" --local-addr n0 "$MW"
node n1 $((PORT + 20)) --rdzv-conf "$RZ_FAST" --local_addr n1 "$MW"
rz_wait n0 n1
expect_eq "--local-addr n0 on node 0: the job runs" "$(rz_rcs n0 n1)" "n0=0 n1=0"
expect_eq "--local-addr n0 on node 0: MASTER_ADDR=n0 on both nodes" "$(masters)" "n0 "
# From torchrun's PET_LOCAL_ADDR, an address.
rz_case localpet
PET_LOCAL_ADDR=$EP node n0 $((PORT + 30)) --rdzv-conf "$RZ_FAST" "$MW"
node n1 $((PORT + 30)) --rdzv-conf "$RZ_FAST" "$MW"
rz_wait n0 n1
expect_eq "PET_LOCAL_ADDR on node 0: MASTER_ADDR is it" "$(rz_rcs n0 n1) $(masters)" "n0=0 n1=0 $EP "
# An empty one is a usage error before anything joins.
rc=0
"$AMLRUN" --local-addr= --nproc-per-node 1 true 2>"$TEST_TMP/e" || rc=$?
expect_eq "--local-addr '': usage error" "$rc" 2
has "--local-addr '': the option is named" "$(cat "$TEST_TMP/e")" "local-addr"

# --- the last call's line ----------------------------------------------------
rz_case lastcall
rz_start n0 --rdzv-backend c10d --rdzv-endpoint "$EP:$((PORT + 40))" --nnodes 1:2 \
    --nproc-per-node 1 --cpu-bind none --rdzv-conf "$RZ_FAST,last_call_timeout=1" "$MW"
rz_wait n0
expect_eq "--nnodes 1:2 alone: runs after the last call" "${RC[n0]} $(records | wc -l)" "0 1"
has "--nnodes 1:2 alone: one line says how many are in and when the round forms" \
    "$(cat "$RZ_DIR/n0.err")" \
    "^amlrun: rendezvous: 1 node of 1:2 in; the round forms in 1 s \(last_call_timeout\), or at once if 1 more joins$"
# Two nodes of 1:3: the first in hears that the last call began, the
# second (joining during it) its own line: one line each.
rz_case lastcall2
for n in n0 n1; do
    rz_start "$n" --rdzv-backend c10d --rdzv-endpoint "$EP:$((PORT + 60))" --nnodes 1:3 \
        --nproc-per-node 1 --cpu-bind none --rdzv-conf "$RZ_FAST,last_call_timeout=2" "$MW"
done
rz_wait n0 n1
expect_eq "--nnodes 1:3, two nodes: both run" "$(rz_rcs n0 n1) $(records | wc -l)" "n0=0 n1=0 2"
expect_eq "--nnodes 1:3, two nodes: one line on each node" \
    "$(grep -c 'round forms' "$RZ_DIR/n0.err") $(grep -c 'round forms' "$RZ_DIR/n1.err")" "1 1"
expect_eq "--nnodes 1:3, two nodes: the first heard 1 in, the second 2" \
    "$(cat "$RZ_DIR"/n*.err | sed -n 's/.*rendezvous: \([0-9]\) nodes\{0,1\} of 1:3 in; the round forms in [0-9.]* s (last_call_timeout), or at once if [12] more joins\{0,1\}$/\1/p' | sort | tr '\n' ' ')" "1 2 "
rz_case lastcallq
rz_start n0 --rdzv-backend c10d --rdzv-endpoint "$EP:$((PORT + 50))" --nnodes 1:2 -q \
    --nproc-per-node 1 --cpu-bind none --rdzv-conf "$RZ_FAST,last_call_timeout=1" "$MW"
rz_wait n0
has_no "--nnodes 1:2 -q: no line" "$(cat "$RZ_DIR/n0.err")" "round forms"
no_leftovers "node options"
