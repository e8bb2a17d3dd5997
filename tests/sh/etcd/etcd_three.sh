#!/usr/bin/env bash
# The etcd rendezvous (issue 40) on a real etcd of three members
# (tests/etcd.sh), the endpoint their list: the member the agents talk to
# is SIGKILLed while the job runs, and the job does not notice (it ends
# 0, no agent says anything was lost); a job after, one member down,
# forms on the others; nothing left in etcd.  Short leases (2 s) by
# --rdzv-conf.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/etcd.sh"
etcd_up 3
OUT=$TEST_TMP/out
mkdir -p "$OUT"
export OUT
CONF="keep_alive_interval=0.5,keep_alive_max_attempt=4,last_call_timeout=0.5,join_timeout=30"
WORKER='echo "rank=$RANK world=$WORLD_SIZE restart=$TORCHELASTIC_RESTART_COUNT" >"$OUT/rep.$RANK.$TORCHELASTIC_RESTART_COUNT.$$"
exec sleep "${SLEEP0:-0}"'

# The first member of the list (the one every agent talks to first)
# killed while the workers run.
export SLEEP0=4
start a one --nnodes 2
start b one --nnodes 2
wait_files "$OUT" 'rep\.' 2
expect_eq "a member killed: both workers ran first" "$NFILES" 2
etcd_kill 0
waitall a b
expect_eq "a member killed: both agents exit 0" "$RCS" "0 0"
expect_eq "a member killed: one round, no restart" "$(reports)" "rank=0 world=2 restart=0
rank=1 world=2 restart=0"
check "a member killed: no agent says anything was lost" \
    bash -c '! grep -qi "lost\|stopping\|re-forms" "$0"/a.log "$0"/b.log' "$OUT"
[ "$RCS" = "0 0" ] || dump

# A job after, its first member down: it forms on the others.
rm -f "$OUT"/*
export SLEEP0=0
start a two --nnodes 2
start b two --nnodes 2
waitall a b
expect_eq "one member down: a new job forms and ends 0" "$RCS" "0 0"
[ "$RCS" = "0 0" ] || dump
nap 0.5
ETCD_EP=${ETCD_EP#*,}
expect_eq "three members: nothing left in etcd" "$(etcd_left)" ""
