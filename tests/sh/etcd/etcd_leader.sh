#!/usr/bin/env bash
# The etcd rendezvous (issue 40) on a real etcd of three members
# (tests/etcd.sh): the member the agents talk to, made the leader, is
# SIGKILLed just as a worker fails.  The failure's put reaches a member
# that still takes the dead one for its leader and waits out etcd's request
# timeout (5 s and two elections), longer than the lease (2 s here): the
# agent's keep-alives must go on meanwhile on the other members, so the
# job re-forms once (restart 1) and ends 0, and no agent says it was lost.
# Before, the keep-alives waited for the put and the failing agent lost
# its lease (exit 1, "lost").
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/etcd.sh"
etcd_up 3
OUT=$TEST_TMP/out
mkdir -p "$OUT"
export OUT
CONF="keep_alive_interval=0.5,keep_alive_max_attempt=4,last_call_timeout=0.5,join_timeout=30"
# Rank 0's first worker fails once $OUT/go exists; the others end at once
# once started again.
WORKER='echo "rank=$RANK restart=$TORCHELASTIC_RESTART_COUNT" >"$OUT/rep.$RANK.$TORCHELASTIC_RESTART_COUNT.$$"
[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] || exit 0
while [ ! -e "$OUT/go" ]; do sleep 0.05; done
[ "$RANK" = 0 ] && exit 1
exec sleep 20'

# Member 0 (the first of the list, every agent's) the leader.
id=$(ETCDCTL_API=3 etcdctl --endpoints "${ETCD_EP%%,*}" endpoint status -w json |
    python3 -c 'import json,sys; print("%x" % json.load(sys.stdin)[0]["Status"]["header"]["member_id"])')
etcd_ctl move-leader "$id" >/dev/null 2>&1 || :
check "member 0 is the leader" bash -c \
    "ETCDCTL_API=3 etcdctl --endpoints '${ETCD_EP%%,*}' endpoint status | grep -q ', true, '"

start a lead --nnodes 2 --max-restarts 1
start b lead --nnodes 2 --max-restarts 1
wait_files "$OUT" 'rep\.' 2
expect_eq "the leader killed: both workers ran first" "$NFILES" 2
etcd_kill 0
touch "$OUT/go"
waitall a b
expect_eq "the leader killed as a worker fails: both agents exit 0" "$RCS" "0 0"
expect_eq "the leader killed as a worker fails: one restart of both" \
    "$(reports)" "rank=0 restart=0
rank=0 restart=1
rank=1 restart=0
rank=1 restart=1"
check "the leader killed as a worker fails: no agent says it was lost" \
    bash -c '! grep -qi "lost" "$0"/a.log "$0"/b.log' "$OUT"
[ "$RCS" = "0 0" ] || dump
