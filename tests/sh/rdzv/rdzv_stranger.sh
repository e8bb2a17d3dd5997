#!/usr/bin/env bash
# A stranger (another user, on another node) against an elastic job
# (c10d, --nnodes 1:3, one worker on n0), what amldist_rdzv(3) SECURITY
# says:
#  - without a secret, the stranger's `amlrun ... /bin/false` joins: every
#    node's workers restart in a round with it (not counted as a restart),
#    then its failure ends the job with its status;
#  - with a secret (root's XDG file), the stranger without it is refused
#    and the job runs on, untouched;
#  - a stranger replaying the digest of the job's secret (what a passive
#    capture of a JOIN gave before the handshake) gets nothing.
# As rdzv_stranger@etcd, the same on etcd (the stranger refused because the
# decider key is sealed; the replay, a TCP frame, is c10d's alone).
# amldist-test: etcd
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
. "$TOP/tests/amlrun/rdzv.sh"
. "$TOP/tests/amlrun/stranger.sh"
if ! stranger_setup; then
    skip "a stranger against an elastic job" "not root, or no useradd/runuser"; exit 0
fi
rz_setup 2
EP=$(node_addr n0)
unset AMLDIST_JOB_TOKEN AMLDIST_JOB_TOKEN_FILE AMLDIST_REQUIRE_SECRET
export XDG_CONFIG_HOME=$TEST_TMP/none
CONF=$RZ_FAST,last_call_timeout=0.5
PEER=$TOP/tests/amlrun/rzpeer.py

# job PORT: root's elastic job on n0, its worker running until released.
job() {
    export RZ_RUN=60 RZ_UNTIL=release
    rz_start n0 --rdzv-backend c10d --rdzv-endpoint "$EP:$1" --rdzv-id elastic --nnodes 1:3 \
        --nproc-per-node 1 --rdzv-conf "$CONF" "$RZW"
    rz_wait_files rep. 1 || { fail "root's elastic job starts"; rz_dump; }
}
# stranger PORT: the stranger's amlrun on n1, no secret, a failing worker.
stranger() {
    local rc=0
    rz_argv --rdzv-backend c10d --rdzv-endpoint "$EP:$1" --rdzv-id elastic --nnodes 1:3 \
        --nproc-per-node 1 --rdzv-conf "$CONF" --no-python /bin/false
    on n1 $T runuser -u "$STRANGER" -- env -i PATH=/usr/bin:/bin HOME="$STRANGER_DIR" \
        "$AMLRUN" "${RZ_ARGV[@]}" \
        >"$RZ_DIR/stranger.out" 2>&1 || rc=$?
    diag "the stranger's amlrun: status $rc: $(grep -v 'note: no secret' "$RZ_DIR/stranger.out" | head -c 300)"
    return "$rc"
}

# ---- without a secret ----------------------------------------------------------
rz_case open
job "$PORT"
rc=0
stranger "$PORT" || rc=$?
rz_wait n0
expect_eq "no secret: the stranger's failing worker ends the job with its status" "${RC[n0]}" 1
# (whether root's restarted worker gets to write its record before the
# stranger's failure stops it again depends on the machine's load)
has "no secret: root's node stopped its workers: a node joined" "$(cat "$RZ_DIR/n0.err")" \
    "stopping the 1 worker of this node.*: a node \(.*\) joined: the job re-forms with 2 nodes"
has "no secret: root's node restarted them in a round of 2 nodes (the stranger's)" \
    "$(cat "$RZ_DIR/n0.err")" "the job re-forms with 2 nodes \(this node is node 0\): restarting the workers"

# ---- with a secret -------------------------------------------------------------
rz_case closed
export XDG_CONFIG_HOME=$TEST_TMP/cfg
"$AMLRUN" --make-secret >/dev/null
PORT=$((PORT + 1))
job "$PORT"
rc=0
stranger "$PORT" || rc=$?
# (on etcd: the decider key's value is sealed, and it has no secret)
proof="did not prove it"
[ "$RZ_BACKEND" = etcd ] && proof="sealed with a secret"
check "with a secret: the stranger is refused (2): it did not prove the secret" \
    sh -c '[ "$0" = 2 ] && grep -q "$2" "$1"' "$rc" "$RZ_DIR/stranger.out" "$proof"
expect_eq "with a secret: root's job has its one worker, never restarted" "$(rz_count rep.)" 1
# The digest of the secret, as a capture of a JOIN read it before the
# handshake, replayed by the stranger.
digest=$("$TORCH_PY" -c '
import sys
h = 0xCBF29CE484222325
for b in open(sys.argv[1], "rb").read().rstrip(b"\r\n"):
    h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
print("%016x" % h)' "$XDG_CONFIG_HOME/amldist/secret")
# (the TCP host's JOIN frame: c10d's alone)
if rz_c10d_only "with a secret: a replayed digest" "the TCP host's JOIN frame"; then
printf 'replayed\n' >"$STRANGER_DIR/text"
chown "$STRANGER" "$STRANGER_DIR/text"
on n1 timeout -k 5 10 runuser -u "$STRANGER" -- env -i RZPEER_TOKEN="$digest" RZPEER_RUN=elastic \
    RZPEER_ORDER=none RZPEER_NODES=1:3 RZPEER_KEEPALIVE=500:8 \
    "$TORCH_PY" "$PEER" agent "$PORT" "$EP:$PORT" "$STRANGER_DIR/text" >"$RZ_DIR/stranger-replay.out" 2>&1
diag "the replaying stranger: $(tail -c 400 "$RZ_DIR/stranger-replay.out")"
sleep 1
fi
touch "$RZ_DIR/release"
rz_wait n0
diag "root's node: $(cat "$RZ_DIR/n0.err")"
expect_eq "with a secret: the replayed digest gets nothing, the job succeeds" \
    "${RC[n0]}:$(rz_count rep.)" "0:1"
expect_eq "no process left on any node" "$(leftovers)" ""
