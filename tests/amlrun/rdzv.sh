# shellcheck shell=bash disable=SC2034
# Shared by the control-plane tests (tests/sh/rdzv/*.sh), sourced after
# tests/lib.sh and tests/multinode.sh: one amlrun per namespace node, the
# same command line on each, meeting at --rdzv-endpoint n0:PORT.  The
# workers (tests/amlrun/rdzv_worker.sh) leave record files in $RZ_DIR,
# which every node sees (the namespaces share the file system).
#
# The backend: RZ_BACKEND=c10d (the default) or etcd.  The tests write
# their lines for c10d (--rdzv-backend c10d --rdzv-endpoint n0:PORT); with
# etcd, rz_setup starts a one-member etcd on n0's cluster address
# (tests/etcd.sh; RZ_ETCD_NODES="n0 n1 n2": a member on each of them) and
# rz_argv turns each line into the same job on it: --rdzv-backend etcd
# --rdzv-endpoint <the member>, and a run id of the
# case's and the port's (on c10d a port is one job; on etcd the run id
# is), so that no case meets another's keys.  tests/run.sh runs a test
# marked "# amldist-test: ... etcd" a second time as NAME@etcd, with
# RZ_BACKEND=etcd.  What differs on etcd: the decider's agent (the first to
# win the decider key), not the endpoint's, is node 0 (rz_node0 names it);
# there is no host to lose; a case c10d's alone is skipped by rz_c10d_only.
# rz_start waits, on etcd, for the first agent of a job to hold the decider
# key before it starts the next: the node started first is node 0, as n0
# is on c10d.

RZW=$TOP/tests/amlrun/rdzv_worker.sh
# Heartbeats fast enough for tests: a silent agent is dead after
# RZ_DEAD_MS (keep_alive_interval * keep_alive_max_attempt), long enough
# that an agent a loaded machine leaves unscheduled for a while is not.
RZ_FAST=keep_alive_interval=0.5,keep_alive_max_attempt=8
RZ_DEAD_MS=4000
# The tests check what happened (who stopped a worker, how a loss was
# seen, what an agent says), never how long it took: the times are in
# their diagnostics, and bench/rdzv.sh measures them.
declare -A RZPID=() RC=() END=() RZ_JOBS=()

# rz_setup K: a K-node cluster (or skip), ports below 32768 (node 0's agent
# picks MASTER_PORT among the free ports, which are above).
RZ_BACKEND=${RZ_BACKEND:-c10d}
rz_setup() {
    multinode_setup "$1"
    PORT=$((20000 + RANDOM % 12000))
    RZ_NODES=$1
    case $RZ_BACKEND in
    c10d) ;;
    etcd)
        . "$TOP/tests/etcd.sh"
        # shellcheck disable=SC2086
        etcd_up_nodes ${RZ_ETCD_NODES:-n0} ;;
    *) fail "RZ_BACKEND=$RZ_BACKEND: c10d or etcd"; exit 1 ;;
    esac
}

# rz_argv ARGS...: RZ_ARGV, amlrun's arguments for this backend: ARGS as
# they are on c10d; on etcd, --rdzv-backend c10d becomes etcd,
# --rdzv-endpoint HOST:PORT the etcd member and --rdzv-id ID the case's
# tag, PORT and ID (a case's lines on one port are one job, as on c10d).
rz_argv() {
    RZ_ARGV=("$@")
    [ "$RZ_BACKEND" = etcd ] || return 0
    local a port='' id=''
    RZ_ARGV=()
    while [ $# -gt 0 ]; do
        a=$1
        shift
        case $a in
        --rdzv-backend) shift; RZ_ARGV+=(--rdzv-backend etcd) ;;
        --rdzv-endpoint)
            # (a node's name: the member by its node's name)
            port=${1##*:}
            case $1 in n[0-9]:*) RZ_ARGV+=(--rdzv-endpoint "n0:${ETCD_EP##*:}") ;;
            *) RZ_ARGV+=(--rdzv-endpoint "$ETCD_EP") ;; esac
            shift ;;
        --rdzv-id) id=$1; shift ;;
        --) RZ_ARGV+=("$a" "$@"); break ;;
        *) RZ_ARGV+=("$a") ;;
        esac
        # the worker's own arguments are the worker's
        case $a in "$RZW" | *.py) RZ_ARGV+=("$@"); break ;; esac
    done
    [ -n "$port" ] && RZ_ARGV=(--rdzv-id "${RZ_DIR##*/}-$port${id:+-$id}" "${RZ_ARGV[@]}")
    return 0
}

# rz_c10d_only NAME WHY: 0 on c10d; on etcd, NAME skipped saying WHY, 1.
rz_c10d_only() {
    [ "$RZ_BACKEND" = c10d ] && return 0
    skip "$1" "c10d's alone: $2"
    return 1
}

# rz_case TAG: a fresh record directory for one case (RZ_DIR), no worker
# behaviour left over from the last case.
rz_case() {
    RZ_DIR=$TEST_TMP/$1
    rm -rf "$RZ_DIR"
    mkdir -p "$RZ_DIR"
    export RZ_DIR
    unset RZ_FAIL RZ_FAIL2 RZ_FAIL_ONCE RZ_RUN RZ_UNTIL RZ_DONE RZ_STUBBORN
    RZPID=() RC=() END=() RZ_JOBS=()
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# rz_start NODE ARGS...: `amlrun ARGS...` on NODE in the background, under
# $T; its stdout and stderr in $RZ_DIR/NODE.out and NODE.err, its status
# and end time (ms) in NODE.rc.
rz_start() {
    local node=$1
    shift
    rz_argv "$@"
    local job=${RZ_ARGV[*]:0:2} leads=
    # On etcd, the first agent of a job holds the decider key before the
    # next starts: the node started first is node 0, as the endpoint's node
    # is on c10d (the tests start it first), not whichever agent a loaded
    # machine ran first.
    RZ_LAST_JOB=$job
    if [ "$RZ_BACKEND" = etcd ] && [ "${RZ_ARGV[0]}" = --rdzv-id ] && [ -z "${RZ_JOBS[$job]:-}" ]; then
        RZ_JOBS[$job]=-
        leads=$(etcd_left | grep '/b/lead$' | tr '\n' ' ')
    fi
    (
        rc=0
        on "$node" $T "$AMLRUN" "${RZ_ARGV[@]}" >"$RZ_DIR/$node.out" 2>"$RZ_DIR/$node.err" || rc=$?
        echo "$rc $(now_ms)" >"$RZ_DIR/$node.rc"
    ) &
    RZPID[$node]=$!
    [ "${RZ_JOBS[$job]:-}" = - ] || return 0
    # (RZ_JOBS[job]: the job's key prefix, from its new decider key)
    local n=0 k
    while ((n++ < 100)); do
        for k in $(etcd_left | grep '/b/lead$'); do
            case " $leads " in *" $k "*) ;; *) RZ_JOBS[$job]=${k%/b/lead}; return 0 ;; esac
        done
        nap 0.1
    done
    diag "$node: no decider key in 10 s"
}

# rz_wait_joined N [SEC]: on etcd, until the last job rz_start started has
# N members (its agents' member keys: they have joined); on c10d nothing.
# 1 when they did not come (default 20 s).
rz_wait_joined() {
    [ "$RZ_BACKEND" = etcd ] || return 0
    local pfx=${RZ_JOBS[$RZ_LAST_JOB]:-} deadline=$((SECONDS + ${2:-20}))
    until [ "$(etcd_left | grep -c "^$pfx/m/")" -ge "$1" ]; do
        [ "$SECONDS" -ge "$deadline" ] && return 1
        nap 0.1
    done
}

# rz_wait [NODE...]: wait for those amlruns (default: all started); RC[NODE]
# is each one's status, END[NODE] its end (ms).
rz_wait() {
    local node
    [ $# -gt 0 ] || set -- "${!RZPID[@]}"
    for node in "$@"; do
        wait "${RZPID[$node]}" 2>/dev/null
        read -r "RC[$node]" "END[$node]" <"$RZ_DIR/$node.rc" 2>/dev/null ||
            { RC[$node]=lost; END[$node]=0; }
    done
}

# rz_rcs NODE...: "n0=S n1=S ..." for those nodes (after rz_wait).
rz_rcs() {
    local node out=
    for node in "$@"; do out+="$node=${RC[$node]-none} "; done
    echo "${out% }"
}
# rz_want_rcs STATUS NODE...: what rz_rcs prints when every one is STATUS.
rz_want_rcs() {
    local s=$1 node out=
    shift
    for node in "$@"; do out+="$node=$s "; done
    echo "${out% }"
}

# The worker records (one line per worker start).
rz_reports() { cat "$RZ_DIR"/rep.* 2>/dev/null; }
rz_count() { nfiles "$RZ_DIR" "$1"; echo "$NFILES"; }

# rz_wait_files PREFIX N [SEC]: until N records start with PREFIX (default
# 30 s); 1 when they did not come.
rz_wait_files() { wait_files "$RZ_DIR" "$1" "$2" "${3:-30}"; }

# field KEY <<<LINE: the value of KEY=... in a record line.
field() { tr ' ' '\n' | sed -n "s/^$1=//p"; }

# rz_layout [FILTER]: the records (those whose line matches the regex FILTER)
# as "host rank=R/W local=L/LW node=N group=G/GW role=R/W restart=C", by rank.
rz_layout() {
    rz_reports | grep -E -- "${1:-.}" | awk '{
        for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = substr($i, length(kv[1]) + 2) }
        printf "%s rank=%s/%s local=%s/%s node=%s group=%s/%s role=%s/%s restart=%s\n",
            v["host"], v["rank"], v["world"], v["local"], v["lws"], v["node"],
            v["group"], v["gws"], v["role_rank"], v["role_world"], v["restart"]
    }' | sort -t= -k2,2n
}

# rz_want RESTART HOST:COUNT...: rz_layout's lines when the nodes, in node
# rank order, have these worker counts, numbered as torchrun numbers them
# (RANK = the workers of the lower nodes + LOCAL_RANK).
rz_want() {
    local restart=$1 spec host n world=0 base=0 node=0 i
    shift
    for spec in "$@"; do world=$((world + ${spec#*:})); done
    for spec in "$@"; do
        host=${spec%%:*} n=${spec#*:}
        for ((i = 0; i < n; i++)); do
            printf '%s rank=%s/%s local=%s/%s node=%s group=%s/%s role=%s/%s restart=%s\n' \
                "$host" $((base + i)) "$world" "$i" "$n" "$node" "$node" "$#" \
                $((base + i)) "$world" "$restart"
        done
        base=$((base + n)) node=$((node + 1))
    done
}

# has NAME TEXT ERE: a case passing when TEXT has a line matching ERE.
has() {
    if grep -qE -- "$3" <<<"$2"; then ok "$1"
    else fail "$1"; diag "no /$3/ in:"; sed 's/^/#   /' <<<"$2" | tail -n 20; fi
}

# rz_lost_seen NAME NODE: NODE's agent saw the loss the way the control
# plane promises, and says how: by the connection (closed, reset, a send's
# error) or by RZ_DEAD_MS without a heartbeat (what happened, not how long
# it took: a loss seen any other way, as the workers' own end, says no
# "was lost", and a dead time other than RZ_DEAD_MS names itself).
rz_lost_seen() {
    local dead line what="$1: $2's agent saw the loss by the connection or the dead time"
    dead=$(printf '%d.%d' $((RZ_DEAD_MS / 1000)) $((RZ_DEAD_MS % 1000 / 100)))
    line=$(grep -m 1 ' was lost: ' "$RZ_DIR/$2.err")
    case $line in
    *" was lost: no heartbeat for $dead s") ok "$what" ;;
    *" was lost: no heartbeat for "* | "") fail "$what"; diag "$2: ${line:-no loss said}" ;;
    *) ok "$what" ;;
    esac
}

# The amlrun of NODE: the process named amlrun that `timeout` started
# there (its workers may live in a PID namespace of their own).
rz_agent_pid() {
    local p pp
    for p in $(netns_pids "$CLUSTER-$1"); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = amlrun ] || continue
        pp=$(awk '{ print $4 }' "/proc/$p/stat" 2>/dev/null)
        [ "$(cat "/proc/$pp/comm" 2>/dev/null)" = timeout ] && { echo "$p"; return 0; }
    done
    return 1
}

# rz_term_ms FILTER: the latest SIGTERM time (ms) of the workers whose
# term.<host>.<rank>.<pid> file name matches the ERE FILTER, "" if none.
rz_term_ms() {
    local f t max=
    for f in "$RZ_DIR"/term.*; do
        [ -e "$f" ] && grep -qE -- "$1" <<<"${f##*/}" || continue
        t=$(($(cat "$f") / 1000000))
        [ -z "$max" ] || [ "$t" -gt "$max" ] && max=$t
    done
    echo "$max"
}
rz_fail_ms() { local f; for f in "$RZ_DIR"/fail.*; do [ -e "$f" ] && echo $(($(cat "$f") / 1000000)) && return; done; }

# no_leftovers NAME: no process may be left on any node (the last ones may
# take a moment to go after their amlrun returns); whatever was left is
# killed so that it does not spoil the next case.
no_leftovers() {
    local name=$1 left ns
    left=$(leftovers)
    expect_eq "$name: no process left on any node" "$left" ""
    if [ -n "$left" ]; then
        for ns in /run/netns/"$CLUSTER"-n*; do netns_kill_all "${ns##*/}"; done
    fi
}

# rz_dump: the amlruns' output, as diagnostics (for a failed case).
rz_dump() {
    local f
    for f in "$RZ_DIR"/n*.out "$RZ_DIR"/n*.err; do
        [ -s "$f" ] || continue
        diag "--- ${f##*/}"
        tail -n 15 "$f" | sed 's/^/#   /'
    done
}

# rz_order [FILTER]: the nodes as the records say, "host:count" in node rank
# order (a host that reported two node ranks or counts appears twice).
rz_order() {
    rz_reports | grep -E -- "${1:-.}" | awk '{
        for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = substr($i, length(kv[1]) + 2) }
        print v["node"], v["host"] ":" v["lws"]
    }' | sort -u | sort -n -k1,1 | awk '{ print $2 }'
}

# rz_node0 [FILTER]: the host of node 0 as the records say (n0 on c10d:
# the endpoint's; on etcd the decider's, any of them).
rz_node0() { rz_order "${1:-.}" | head -n 1 | cut -d: -f1; }

# rz_check_layout NAME NODES RESTART [FILTER]: the records (matching
# FILTER) of a job of NODES nodes: node ranks 0..NODES-1, one per host,
# node 0 n0 (the endpoint's node; on etcd any node), every worker numbered
# as torchrun numbers them, one MASTER_ADDR (node 0's address) and one
# MASTER_PORT.
rz_check_layout() {
    local name=$1 nodes=$2 restart=$3 filter=${4:-.} order nums want0=n0
    order=$(rz_order "$filter")
    nums=$(rz_reports | grep -E -- "$filter" | field node | sort -n | uniq | tr '\n' ' ')
    expect_eq "$name: node ranks are 0..$((nodes - 1))" "$nums" "$(seq -s ' ' 0 $((nodes - 1))) "
    [ "$RZ_BACKEND" = etcd ] && want0=$(rz_node0 "$filter")
    expect_eq "$name: one node rank per host, $want0 is node 0 ($RZ_BACKEND)" \
        "$(cut -d: -f1 <<<"$order" | sort -u | wc -l) $(head -n 1 <<<"$order" | cut -d: -f1)" \
        "$nodes $want0"
    # shellcheck disable=SC2086
    expect_eq "$name: ranks as torchrun numbers them" "$(rz_layout "$filter")" \
        "$(if [ -n "$order" ]; then rz_want "$restart" $order; else echo '(some records)'; fi)"
    local addrs ports
    addrs=$(rz_reports | grep -E -- "$filter" | field addr | sort -u)
    ports=$(rz_reports | grep -E -- "$filter" | field port | sort -u)
    check "$name: one MASTER_ADDR, node 0's address ($(echo $addrs))" \
        rz_is_n0 "$addrs" "$(rz_node0 "$filter")"
    check "$name: one MASTER_PORT on every node ($(echo $ports))" \
        test "$(wc -l <<<"$ports")" = 1 -a -n "$ports" -a "${ports//[0-9]/}" = ""
}
# rz_is_n0 ADDRS [NODE0]: one address, node 0's (n0's on c10d, NODE0's on
# etcd), by number or by name.
rz_is_n0() {
    local want=10.231.0.10
    [ "$RZ_BACKEND" = etcd ] && want=$(node_addr "${2:-n0}")
    [ "$(wc -l <<<"$1")" = 1 ] || return 1
    case $1 in "$want") return 0 ;; "") return 1 ;; esac
    [ "$(on n1 getent ahostsv4 "$1" | awk '{ print $1; exit }')" = "$want" ]
}

# rz_expect NAME GOT WANT: expect_eq, with the amlruns' output when it fails.
rz_expect() {
    expect_eq "$@"
    [ "$2" = "$3" ] || rz_dump
}

# rz_wait_listen NODE PORT: until something listens on PORT on NODE (the
# host's agent on the endpoint); rz_wait_conn NODE PORT: until NODE has a
# connection to PORT (an agent that reached the host).  At most 20 s.
# (rz_wait_refused below: an agent that tried and was refused.)
rz_wait_listen() {
    local n=0
    until on "$1" ss -Htln "sport = :$2" | grep -q .; do
        ((n++ < 400)) || return 1
        nap 0.05
    done
}
# rz_rsts NODE: the TCP resets NODE has sent (its namespace's
# /proc/net/snmp): one more after an agent started means the agent has
# tried NODE's port and been refused, and now waits for its host.
rz_rsts() {
    on "$1" awk '$1 == "Tcp:" { if (n++) { for (i = 2; i <= NF; i++) if (h[i] == "OutRsts") print $i } else split($0, h) }' /proc/net/snmp
}
# rz_wait_refused NODE COUNT: until NODE has sent more than COUNT resets
# (rz_rsts before the agent started).  At most 20 s.
rz_wait_refused() {
    local n=0
    until [ "$(rz_rsts "$1")" -gt "$2" ]; do
        ((n++ < 400)) || return 1
        nap 0.05
    done
}
rz_wait_conn() {
    local n=0
    until on "$1" ss -Htn state established "dport = :$2" | grep -q .; do
        ((n++ < 400)) || return 1
        nap 0.05
    done
}

# rz_summary NAME RANK NODE HOST STATUS: node 0's agent printed one summary
# of the job's failure naming the rank and its node, its host, the status
# (KILL: killed by SIGKILL) and the worker's last line (as rdzv_worker.sh
# words it); its first two lines as amlrun(1) words them:
#   amlrun: job failed (exit status 7): first failure: node 1 (10.0.0.5), rank 3: exit status 7
#   amlrun:   rank 3 (local 1, pid 4711) on host n1: exited with status 7
rz_summary() {
    local name=$1 rank=$2 nrank=$3 fhost=$4 status=$5 err0 summary addr stre st how
    err0=$(cat "$RZ_DIR/$(rz_node0).err")
    summary=$(sed -n '/job failed/,$p' <<<"$err0")
    addr="10\\.231\\.0\\.1${fhost#n}"
    stre="status $status" st=$status how="exited with status $status"
    if [ "$status" = KILL ]; then
        stre="status 137|signal 9" st=137 how="killed by signal 9 \\(SIGKILL\\)"
    fi
    expect_eq "$name: node 0 prints one summary" "$(grep -c 'job failed' <<<"$err0")" 1
    has "$name: the summary names rank $rank and node $nrank" "$summary" \
        "rank $rank\\b.*node $nrank\\b|node $nrank\\b.*rank $rank\\b"
    has "$name: the summary names the host ($fhost)" "$summary" "host ($fhost|$addr)\\b"
    has "$name: the summary names the status ($stre)" "$summary" "$stre"
    has "$name: the summary has the worker's last line" "$summary" \
        "rank $rank fails on $fhost with status $status \\(last words\\)"
    has "$name: the summary's first lines as amlrun(1) words them" \
        "$(sed -n '/job failed/{N;p}' <<<"$err0" | tr '\n' '~')" \
        "^amlrun: job failed \\(exit status $st\\): first failure: node $nrank \\($addr\\), rank $rank: exit status $st~amlrun:   rank $rank \\(local [0-9]+, pid [0-9]+\\) on host $fhost: $how~\$"
}
