#!/usr/bin/env bash
# Failure propagation through the control plane (issue 12): three nodes,
# the same amlrun line on each (c10d rendezvous at n0), two workers per
# node.  A worker failing on one node stops every node's workers within a
# second (the workers record when SIGTERM came; the namespaces share one
# clock), every agent exits with the worker's status, node 0's agent prints
# one summary naming the rank, its node and host, the status and the
# worker's last lines, and nothing is left on any node.  A stop signal to
# one node's agent stops the whole job (no restart, whatever
# --max-restarts says), every agent exiting 128+signal.
# amldist-test: etcd (also as rdzv_failure@etcd: tests/amlrun/rdzv.sh's RZ_BACKEND)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
. "$TOP/tests/amlrun/rdzv.sh"
rz_setup 3
EP=$(node_addr n0)
NODES=(n0 n1 n2)

# start_all PORT [ARGS...]: the same line on every node (c10d), or with
# STATIC=1 the static rendezvous (--node-rank, MASTER_ADDR:PORT).
STATIC=0
start_all() {
    local port=$1 node
    shift
    for node in "${NODES[@]}"; do
        if [ "$STATIC" = 1 ]; then
            rz_start "$node" --nnodes ${#NODES[@]} --node-rank "${node#n}" --master-addr n0 \
                --master-port "$port" --nproc-per-node 2 --rdzv-conf "$RZ_FAST" "$@" "$RZW"
        else
            rz_start "$node" --rdzv-backend c10d --rdzv-endpoint "$EP:$port" \
                --nnodes ${#NODES[@]} --nproc-per-node 2 --rdzv-conf "$RZ_FAST" "$@" "$RZW"
        fi
    done
}

# failure NAME TAG PORT WHO STATUS WANT: worker WHO (HOST/LOCAL_RANK) ends
# with STATUS once every worker runs; every agent must exit WANT.
failure() {
    local name=$1 tag=$2 port=$3 who=$4 status=$5 want=$6
    local fhost=${who%/*} node
    rz_case "$tag"
    export RZ_FAIL="$who:$status:all" RZ_RUN=60
    start_all "$port"
    rz_wait
    rz_expect "$name: every agent exits $want" "$(rz_rcs "${NODES[@]}")" \
        "$(rz_want_rcs "$want" "${NODES[@]}")"
    local rec rank nrank t_fail
    rec=$(rz_reports | grep -E "^host=$fhost rank=[0-9]+ local=${who#*/} ")
    rank=$(field rank <<<"$rec") nrank=$(field node <<<"$rec")
    t_fail=$(rz_fail_ms)
    if [ -z "$rank" ] || [ -z "$t_fail" ]; then
        fail "$name: the failing worker ran and failed"
        rz_dump
        no_leftovers "$name"
        return
    fi
    # Every other worker was stopped with SIGTERM, those of the other nodes
    # after the failure and because of it (each agent says so, below):
    # workers that ran out their RZ_RUN would have had none, and their
    # agents would exit 0.  How soon is bench/rdzv.sh's figure, not a test's.
    expect_eq "$name: every other worker got SIGTERM" "$(rz_count term.)" $((2 * ${#NODES[@]} - 1))
    for node in "${NODES[@]}"; do
        [ "$node" = "$fhost" ] && continue
        local t
        t=$(rz_term_ms "^term\\.$node\\.")
        diag "$name: $node's workers stopped $((${t:-0} - t_fail)) ms after the failure, its agent ended after $((${END[$node]} - t_fail)) ms"
        check "$name: $node's workers got SIGTERM after the failure" test -n "$t" -a "${t:-0}" -ge "$t_fail"
    done
    rz_summary "$name" "$rank" "$nrank" "$fhost" "$status"
    # The other nodes say why they stop their workers (amlrun(1)'s wording).
    local st=$status
    [ "$status" = KILL ] && st=137
    for node in "${NODES[@]}"; do
        [ "$node" = "$fhost" ] && continue
        has "$name: $node says why it stops its workers" "$(cat "$RZ_DIR/$node.err")" \
            "^amlrun: stopping the 2 workers of this node, ranks [0-9]+-[0-9]+ \\(SIGTERM, SIGKILL after [0-9]+ s\\): node $nrank \\(10\\.231\\.0\\.1${fhost#n}\\), a worker, failed with exit status $st\$"
    done
    for node in "${NODES[@]:1}"; do
        diag "$name: $node's stderr: $(grep -c . "$RZ_DIR/$node.err") lines; $(grep -m1 'amlrun' "$RZ_DIR/$node.err")"
    done
    no_leftovers "$name"
}

failure "a worker on n1 exits 7" fail-n1 "$PORT" n1/1 7 7
failure "a worker on n0 (the host's node) exits 7" fail-n0 $((PORT + 10)) n0/1 7 7
failure "a worker on n2 is killed by SIGKILL" kill-n2 $((PORT + 20)) n2/0 KILL 137

# Two workers fail at once on two nodes (3 on n1, 5 on n2): one of them is
# the job's first failure, and every agent exits with its status.
rz_case two
export RZ_FAIL=n1/0:3:all RZ_FAIL2=n2/0:5:all RZ_RUN=60
start_all $((PORT + 70))
rz_wait
name="workers on n1 and n2 fail at once (3 and 5)"
diag "$name: agents exit $(rz_rcs "${NODES[@]}")"
check "$name: every agent exits with the same status, 3 or 5 ($(rz_rcs "${NODES[@]}"))" \
    test "${RC[n0]}" = "${RC[n1]}" -a "${RC[n1]}" = "${RC[n2]}" -a \( "${RC[n0]}" = 3 -o "${RC[n0]}" = 5 \)
expect_eq "$name: node 0 prints one summary" "$(grep -c 'job failed' "$RZ_DIR/n0.err")" 1
has "$name: the summary names the status the agents exit with" "$(sed -n '/job failed/,$p' "$RZ_DIR/n0.err")" \
    "status ${RC[n0]}\\b"
no_leftovers "$name"

# Every worker of n0 has ended well when a worker of n1 fails (a second
# after it started): n0's agent still learns of it, exits 7 and prints
# the summary.
rz_case late-fail
export RZ_FAIL=n1/1:7:1
start_all $((PORT + 80))
rz_wait
name="n0's workers done, then a worker on n1 exits 7"
rz_expect "$name: every agent exits 7" "$(rz_rcs "${NODES[@]}")" "$(rz_want_rcs 7 "${NODES[@]}")"
rec=$(rz_reports | grep -E "^host=n1 rank=[0-9]+ local=1 ")
[ -n "$rec" ] && rz_summary "$name" "$(field rank <<<"$rec")" "$(field node <<<"$rec")" n1 7
no_leftovers "$name"

# A worker on n0 ignores SIGTERM: its agent SIGKILLs it after
# --term-timeout 2; every agent still exits 7.  (The agent's own doing: on
# etcd, nothing the cases above have not had.)
if rz_c10d_only "--term-timeout 2 across nodes" "the agent's, not the backend's"; then
rz_case stubborn
export RZ_FAIL=n1/1:7:all RZ_RUN=30 RZ_STUBBORN=n0/0
start_all $((PORT + 90)) --term-timeout 2
rz_wait
name="a worker on n1 exits 7, one on n0 ignores SIGTERM (--term-timeout 2)"
rz_expect "$name: every agent exits 7" "$(rz_rcs "${NODES[@]}")" "$(rz_want_rcs 7 "${NODES[@]}")"
t_fail=$(rz_fail_ms)
t_term=$(rz_term_ms '^term\.n0\.')
diag "$name: n0's workers had SIGTERM $((${t_term:-0} - ${t_fail:-0})) ms after the failure, n0's agent ended after $((${END[n0]} - ${t_fail:-0})) ms, n2's after $((${END[n2]} - ${t_fail:-0})) ms"
check "$name: n0's workers had SIGTERM after it" test -n "$t_term" -a "${t_term:-0}" -ge "${t_fail:-0}"
# After the grace, not at the worker's 30 s: n0's agent SIGKILLed it, and
# says after how long (what happened, not how long the test saw it take).
has "$name: n0's agent SIGKILLed the stubborn worker after the 2 s grace" "$(cat "$RZ_DIR/n0.err")" \
    '^amlrun: [0-9]+ workers? still running 2 s after SIGTERM: sending SIGKILL$'
no_leftovers "$name"
fi

# The static rendezvous (--node-rank, two nodes) has the same control plane
# (no backend's: c10d's program runs it).
if rz_c10d_only "static, a worker on n1 exits 7" "the static rendezvous has no backend"; then
    NODES=(n0 n1) STATIC=1
    failure "static, a worker on n1 exits 7" static-n1 $((PORT + 60)) n1/0 7 7
    NODES=(n0 n1 n2) STATIC=0
fi

# stop NAME TAG PORT NODE SIG WANT: SIG to NODE's amlrun once every worker
# runs; every agent must exit WANT, no worker start again.
stop() {
    local name=$1 tag=$2 port=$3 node=$4 sig=$5 want=$6 pid other
    rz_case "$tag"
    export RZ_RUN=60 RZ_UNTIL=never
    start_all "$port" --max-restarts 2
    if ! rz_wait_files rep. 6 || ! pid=$(rz_agent_pid "$node"); then
        fail "$name: the job runs"
        rz_dump
    else
        kill -"$sig" "$pid"
    fi
    rz_wait
    rz_expect "$name: every agent exits $want" "$(rz_rcs "${NODES[@]}")" \
        "$(rz_want_rcs "$want" "${NODES[@]}")"
    expect_eq "$name: no restart (each worker started once)" "$(rz_count rep.)" 6
    for other in "${NODES[@]}"; do
        [ "$other" = "$node" ] && continue
        expect_eq "$name: $other's workers got SIGTERM" "$(rz_count "term.$other.")" 2
    done
    no_leftovers "$name"
}
stop "SIGTERM to n1's amlrun" term-n1 $((PORT + 30)) n1 TERM 143
stop "SIGTERM to n0's amlrun (the host)" term-n0 $((PORT + 40)) n0 TERM 143
# (SIGINT: the agent's word, the same as SIGTERM's to the backend)
if rz_c10d_only "SIGINT to n2's amlrun" "the backend sees a stop as for SIGTERM"; then
    stop "SIGINT to n2's amlrun" int-n2 $((PORT + 50)) n2 INT 130
fi
