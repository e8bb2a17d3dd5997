#!/usr/bin/env bash
# Elastic jobs, --nnodes MIN:MAX (issue 12), the same amlrun line on each
# node (c10d rendezvous at n0, one worker per node):
#  - a node arriving during the last call is part of the first round;
#  - a node arriving after the job started (fewer than MAX nodes) makes the
#    job re-form: every worker starts again in a round that includes it,
#    not counted as a restart (TORCHELASTIC_RESTART_COUNT stays 0), the
#    nodes that were there keep their order, the newcomer follows;
#  - a node lost with at least MIN left: the job re-forms with the others;
#    with fewer than MIN left it ends with 125;
#  - a node arriving when the job has MAX nodes is refused (exit 2) and the
#    job goes on;
#  - a node declared dead (frozen) is not let back in when it thaws.
# As rdzv_elastic@etcd the same on etcd, where the host's node killed is
# the decider's: the others re-form.
# amldist-test: etcd (also as rdzv_elastic@etcd: tests/amlrun/rdzv.sh's RZ_BACKEND)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
. "$TOP/tests/amlrun/rdzv.sh"
rz_setup 3
EP=$(node_addr n0)

# node NODE PORT NNODES CONF: one agent of the elastic job.
node() {
    rz_start "$1" --rdzv-backend c10d --rdzv-endpoint "$EP:$2" --nnodes "$3" \
        --nproc-per-node 1 --rdzv-conf "$RZ_FAST,$4" "$RZW"
}
worlds() { rz_reports | field world | sort | uniq -c | awk '{ print $2 "x" $1 }' | tr '\n' ' '; }

# Late, but within the last call: n2 once n0 and n1 are in and the last
# call has begun (the host tells them so: "rendezvous: 2 nodes of 2:3 in;
# the round forms in ..."; a second's sleep instead left it to chance that
# it had; the last call is long, so that a loaded machine does not make n2
# later than it; the round starts as soon as n2, the third and last,
# joins).  With the job's secret (issue 21).
AMLDIST_JOB_TOKEN=$(job_secret elastic-secret)
export AMLDIST_JOB_TOKEN
rz_case lastcall
node n0 "$PORT" 2:3 last_call_timeout=20
node n1 "$PORT" 2:3 last_call_timeout=20
n=0
until grep -q "rendezvous: 2 nodes of 2:3 in; the round forms" "$RZ_DIR/n1.err" 2>/dev/null; do
    ((n++ < 1200)) || { fail "the last call begins with n0 and n1"; break; }
    sleep 0.05
done
node n2 "$PORT" 2:3 last_call_timeout=20
rz_wait
name="2:3, n2 a second late (last call 20 s), with a secret"
rz_expect "$name: every agent exits 0" "$(rz_rcs n0 n1 n2)" "n0=0 n1=0 n2=0"
expect_eq "$name: one round of 3 workers (world sizes seen)" "$(worlds)" "3x3 "
rz_check_layout "$name" 3 0
no_leftovers "$name"
unset AMLDIST_JOB_TOKEN

# Late, after the job started with 2 nodes: the job re-forms with 3.  The
# workers live until they are in a world of 3.
rz_case reform
export RZ_RUN=60 RZ_DONE=' world=3 '
node n0 $((PORT + 10)) 2:3 last_call_timeout=0.5
node n1 $((PORT + 10)) 2:3 last_call_timeout=0.5
name="2:3, n2 joins the running job"
if rz_wait_files rep. 2; then
    t0=$(now_ms)
    node n2 $((PORT + 10)) 2:3 last_call_timeout=0.5
fi
rz_wait
diag "$name: agents exit $(rz_rcs n0 n1 n2), $((${END[n0]} - t0)) ms after n2 started; world sizes seen: $(worlds)"
rz_expect "$name: every agent exits 0" "$(rz_rcs n0 n1 n2)" "n0=0 n1=0 n2=0"
expect_eq "$name: the first round ran n0 and n1 (world 2)" \
    "$(rz_layout ' world=2 ' | cut -d' ' -f1-4)" \
    "$(printf 'n0 rank=0/2 local=0/1 node=0\nn1 rank=1/2 local=0/1 node=1')"
expect_eq "$name: their workers were stopped (SIGTERM)" "$(rz_count term.)" 2
expect_eq "$name: then one round of 3: n0, n1 keep their ranks, n2 follows, restart count 0" \
    "$(rz_layout ' world=3 ')" "$(rz_want 0 n0:1 n1:1 n2:1)"
rz_check_layout "$name: the new round" 3 0 ' world=3 '
diag "$name: MASTER_PORT $(rz_reports | grep ' world=2 ' | field port | sort -u) then $(rz_reports | grep ' world=3 ' | field port | sort -u)"
no_leftovers "$name"

# Lost with MIN left: n2 killed, the job re-forms with n0 and n1.
rz_case shrink
export RZ_RUN=60 RZ_DONE=' world=2 '
for n in n0 n1 n2; do node $n $((PORT + 20)) 2:3 last_call_timeout=2; done
# The node in the middle (node rank 1) is killed: the last one follows n0.
name="2:3, node 1 killed"
mid=none last=none
if rz_wait_files rep. 3; then
    mid=$(rz_reports | grep ' node=1 ' | field host)
    last=$(rz_reports | grep ' node=2 ' | field host)
    name="2:3, node 1 ($mid) killed"
    t0=$(now_ms)
    netns_kill_all "$CLUSTER-$mid"
fi
rz_wait
diag "$name: n0 ended $((${END[n0]} - ${t0:-0})) ms after the kill; world sizes seen: $(worlds)"
rz_expect "$name: n0 and $last exit 0" "$(rz_rcs n0 "$last")" "n0=0 $last=0"
expect_eq "$name: a round of 3, then n0 and $last in a round of 2 in that order, restart count 0" \
    "$(rz_layout ' world=2 ')" "$(rz_want 0 n0:1 "$last":1)"
expect_eq "$name: the round of 3's workers on n0 and $last were stopped" \
    "$(rz_count term.n0.) $(rz_count "term.$last.")" "1 1"
no_leftovers "$name"

# Lost with fewer than MIN left: the job ends with 125.
rz_case under
export RZ_RUN=60 RZ_UNTIL=never
node n0 $((PORT + 30)) 2:3 last_call_timeout=1
node n1 $((PORT + 30)) 2:3 last_call_timeout=1
name="2:3 with 2 nodes, n1 killed"
if rz_wait_files rep. 2; then
    t0=$(now_ms)
    netns_kill_all "$CLUSTER-n1"
fi
rz_wait
rz_expect "$name: n0 exits 125" "${RC[n0]}" 125
diag "$name: n0 ended $((${END[n0]} - t0)) ms after the kill"
rz_lost_seen "$name" n0
expect_eq "$name: n0's worker was stopped" "$(rz_count term.n0.)" 1
no_leftovers "$name"

# A node beyond MAX: refused, the job goes on.
rz_case full
export RZ_RUN=60 RZ_UNTIL=release
node n0 $((PORT + 40)) 1:2 last_call_timeout=2
node n1 $((PORT + 40)) 1:2 last_call_timeout=2
name="1:2 with 2 nodes running, n2 joins"
if rz_wait_files rep. 2; then
    t0=$(now_ms)
    node n2 $((PORT + 40)) 1:2 last_call_timeout=2
    rz_wait n2
    rz_expect "$name: n2 is refused (2)" "${RC[n2]}" 2
    diag "$name: refused after $((${END[n2]} - t0)) ms: $(head -n 3 "$RZ_DIR/n2.err")"
    has "$name: n2 says the job is full" "$(cat "$RZ_DIR/n2.err")" 'full|has its [0-9]+ nodes'
    sleep 0.5
    touch "$RZ_DIR/release"
fi
rz_wait
rz_expect "$name: the job goes on, n0 and n1 exit 0" "$(rz_rcs n0 n1)" "n0=0 n1=0"
expect_eq "$name: its workers ran once, no worker on n2" "$(rz_layout | cut -d' ' -f1-2 | tr '\n' ' ')" \
    "n0 rank=0/2 n1 rank=1/2 "
no_leftovers "$name"

# A node frozen (SIGSTOP) in a job of 3, 2:3: declared dead, the job
# re-forms with n0 and n1; thawed, n2 is stale: it must not take part
# again (refused, 2, or finding its host connection gone, 125), it stops
# its worker, and the job goes on.
rz_case stale
export RZ_RUN=60 RZ_UNTIL=release
# (a last call of 5 s: the three agents start together, but a loaded
# machine may start one late)
for n in n0 n1 n2; do node $n $((PORT + 50)) 2:3 last_call_timeout=5; done
name="2:3, n2 frozen then thawed"
if rz_wait_files rep. 3; then
    # shellcheck disable=SC2046
    kill -STOP $(netns_pids "$CLUSTER-n2") 2>/dev/null
    if rz_wait_files rep. 5; then
        # shellcheck disable=SC2046
        kill -CONT $(netns_pids "$CLUSTER-n2") 2>/dev/null
        rz_wait n2
        diag "$name: n2 exits ${RC[n2]}: $(grep -m 2 amlrun "$RZ_DIR/n2.err" | tr '\n' ' ')"
        check "$name: n2 exits 2 (stale) or 125 (${RC[n2]})" test "${RC[n2]}" = 2 -o "${RC[n2]}" = 125
        # (on etcd, its own stop, not etcd's silence: it had asked nobody)
        [ "$RZ_BACKEND" = etcd ] && check "$name: n2 does not blame etcd" \
            sh -c '! grep -q "no etcd member answered" "$0"' "$RZ_DIR/n2.err"
        expect_eq "$name: n2's worker was stopped" "$(rz_count term.n2.)" 1
        sleep 0.5
    else
        fail "$name: the job re-forms with n0 and n1"
        # shellcheck disable=SC2046
        kill -CONT $(netns_pids "$CLUSTER-n2") 2>/dev/null
    fi
fi
touch "$RZ_DIR/release"
rz_wait
rz_expect "$name: n0 and n1 exit 0" "$(rz_rcs n0 n1)" "n0=0 n1=0"
expect_eq "$name: rounds of 3 then 2, no worker of n2 after the first" "$(worlds)" "2x2 3x3 "
expect_eq "$name: the round of 2 is n0 and n1, restart count 0" \
    "$(rz_layout ' world=2 ')" "$(rz_want 0 n0:1 n1:1)"
no_leftovers "$name"

# The host's node killed in an elastic job: the others lose the host and
# end with 125 (none of them can host the endpoint's address).  On etcd
# there is no host to lose: the decider's node killed, another agent takes
# the decider over and the two left re-form (2 >= MIN), restart count 0.
rz_case host-killed
export RZ_RUN=60 RZ_UNTIL=never
for n in n0 n1 n2; do node $n $((PORT + 60)) 2:3 last_call_timeout=2; done
name="2:3, the host's node n0 killed"
[ "$RZ_BACKEND" = etcd ] && name="2:3, the decider's node n0 killed"
if rz_wait_files rep. 3; then
    t0=$(now_ms)
    netns_kill_all "$CLUSTER-n0"
fi
if [ "$RZ_BACKEND" = etcd ]; then
    rz_wait_files rep. 5 || fail "$name: n1 and n2 re-form"
    touch "$RZ_DIR/never"
    rz_wait
    rz_expect "$name: n1 and n2 exit 0" "$(rz_rcs n1 n2)" "n1=0 n2=0"
    diag "$name: n1 and n2 ended $((${END[n1]} - t0)) and $((${END[n2]} - t0)) ms after the kill"
    expect_eq "$name: their first workers were stopped, then a round of 2 ran" \
        "$(rz_count term.n1.) $(rz_count term.n2.) $(rz_reports | grep -c ' world=2 ')" "1 1 2"
    rz_check_layout "$name: the round of 2" 2 0 ' world=2 '
else
    rz_wait
    rz_expect "$name: n1 and n2 exit 125" "$(rz_rcs n1 n2)" "n1=125 n2=125"
    diag "$name: n1 and n2 ended $((${END[n1]} - t0)) and $((${END[n2]} - t0)) ms after the kill"
    rz_lost_seen "$name" n1
    rz_lost_seen "$name" n2
    expect_eq "$name: their workers were stopped, none started again" \
        "$(rz_count term.n1.) $(rz_count term.n2.) $(rz_count rep.)" "1 1 3"
fi
no_leftovers "$name"

# Re-formed, then a failure: the re-forming was no restart, the failure is
# one.  n0 and n1 start (2:3, --max-restarts 1), n2 joins the running job,
# then n2's worker fails once: the last round has all three nodes and
# TORCHELASTIC_RESTART_COUNT=1.
rz_case reform-fail
export RZ_RUN=60 RZ_DONE=' world=3 .* restart=1 ' RZ_FAIL=n2/0:7:all RZ_FAIL_ONCE=1
name="2:3 --max-restarts 1, n2 joins, then its worker fails once"
for n in n0 n1; do
    rz_start "$n" --rdzv-backend c10d --rdzv-endpoint "$EP:$((PORT + 70))" --nnodes 2:3 \
        --max-restarts 1 --nproc-per-node 1 --rdzv-conf "$RZ_FAST,last_call_timeout=0.5" "$RZW"
done
if rz_wait_files rep. 2; then
    rz_start n2 --rdzv-backend c10d --rdzv-endpoint "$EP:$((PORT + 70))" --nnodes 2:3 \
        --max-restarts 1 --nproc-per-node 1 --rdzv-conf "$RZ_FAST,last_call_timeout=0.5" "$RZW"
fi
rz_wait
diag "$name: agents exit $(rz_rcs n0 n1 n2); starts: $(rz_reports | awk '{ print $1, $8, $13 }' | sort | uniq -c | tr '\n' ';')"
rz_expect "$name: every agent exits 0" "$(rz_rcs n0 n1 n2)" "n0=0 n1=0 n2=0"
expect_eq "$name: the first round had 2 nodes, restart count 0" \
    "$(rz_reports | grep -c ' world=2 .* restart=0 ')" 2
expect_eq "$name: the last round: 3 nodes in their order, restart count 1" \
    "$(rz_layout ' restart=1 ')" "$(rz_want 1 n0:1 n1:1 n2:1)"
no_leftovers "$name"
