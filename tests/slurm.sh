# shellcheck shell=bash disable=SC2034
# Shared setup of the Slurm shell tests (tests/sh/slurm/*.sh): sourced after
# lib.sh.  A real two-node Slurm 22.05 (Debian's slurmctld, slurmd,
# slurm-client) on the namespace cluster of scripts/netns-cluster.sh:
# slurmctld and slurmd n0 on node n0, slurmd n1 on node n1, no munge
# (auth/none, cred/none), no systemd, no cgroups (proctrack/linuxproc,
# task/none), every file under this test's temp dir.  Each slurmd gets its
# own /tmp (a bind mount inside its node's mount namespace), as on real
# nodes: srun --mpi=pmix's step daemons would collide on a shared one.  The
# daemons run in the foreground (-D) in the background of this shell and
# are stopped by PID however the test ends; then the cluster goes.
#
# Run client commands on n0 with `slurm_on n0 srun ...` (SLURM_CONF is
# exported; the host namespace has no route to the nodes).  Skips the whole
# test, with the reason, where Slurm or namespaces are missing.

. "$TOP/scripts/netns-cluster.sh"

SLURM_PLUGINS=/usr/lib/x86_64-linux-gnu/slurm-wlm
for d in /usr/lib/*/slurm-wlm /usr/lib/slurm-wlm /usr/lib64/slurm; do
    [ -e "$d/auth_none.so" ] && { SLURM_PLUGINS=$d; break; }
done

# slurm_setup: a running two-node Slurm, or "ok - ... # SKIP" and exit 0.
slurm_setup() {
    local name
    name="slurm ($(basename "$0" .sh))"
    if [ ! -x "$AMLRUN" ]; then
        fail "$name: $AMLRUN is built"
        exit 1
    fi
    local p
    for p in slurmctld slurmd srun sbatch salloc scontrol scancel sinfo; do
        if ! have "$p"; then
            skip "$name" "no $p (install slurmctld, slurmd and slurm-client: scripts/install-deps.sh)"
            exit 0
        fi
    done
    if [ ! -e "$SLURM_PLUGINS/auth_none.so" ] || [ ! -e "$SLURM_PLUGINS/cred_none.so" ]; then
        skip "$name" "Slurm has no auth/none or cred/none plugin (Slurm 23.11 and later dropped them)"
        exit 0
    fi
    if [ "$(id -u)" -ne 0 ]; then
        skip "$name" "slurmd must run as root (tasks of another user)"
        exit 0
    fi
    if ! cluster_up 2; then
        skip "$name" "$NETNS_SKIP"
        exit 0
    fi
    # Stop the daemons before the cluster goes (cluster_up's trap runs
    # cluster_down, then removes $TEST_TMP).
    local prev
    prev=$(trap -p EXIT | sed "s/^trap -- '\(.*\)' EXIT$/\1/")
    # shellcheck disable=SC2064
    trap "slurm_stop; $prev" EXIT
    T="timeout -k 5 ${SLURM_TIMEOUT:-60}"
    SLURM_DIR=$TEST_TMP/slurm
    mkdir -p "$SLURM_DIR/state" "$SLURM_DIR/n0/spool" "$SLURM_DIR/n1/spool" \
        "$SLURM_DIR/n0/tmp" "$SLURM_DIR/n1/tmp"
    export SLURM_CONF=$SLURM_DIR/slurm.conf
    # Job and step ids of this run: a random first id, so that two runs
    # never mix their output files up.  SLURM_SCHEDULER=sched/backfill for
    # heterogeneous jobs, which only the backfill scheduler starts: every
    # second rather than every 30 s.
    cat >"$SLURM_CONF" <<EOF
ClusterName=amldist
SlurmctldHost=n0($(node_addr n0))
SlurmctldPort=6817
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=${SLURM_SCHEDULER:-sched/builtin}
$([ "${SLURM_SCHEDULER:-}" = sched/backfill ] && echo SchedulerParameters=bf_interval=1)
MpiDefault=none
SwitchType=switch/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
PluginDir=$SLURM_PLUGINS
StateSaveLocation=$SLURM_DIR/state
SlurmdSpoolDir=$SLURM_DIR/%n/spool
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/slurmd.%n.pid
SlurmctldLogFile=$SLURM_DIR/slurmctld.log
SlurmdLogFile=$SLURM_DIR/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
SlurmdParameters=config_overrides
ReturnToService=2
FirstJobId=$((1000 + RANDOM))
KillWait=2
MinJobAge=2
InactiveLimit=0
MessageTimeout=10
TmpFS=/tmp
NodeName=n0 NodeAddr=$(node_addr n0) CPUs=8 RealMemory=1000 State=UNKNOWN
NodeName=n1 NodeAddr=$(node_addr n1) CPUs=8 RealMemory=1000 State=UNKNOWN
PartitionName=main Nodes=n0,n1 Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
    # slurmd loads a cgroup plugin whatever the proctrack and task plugins:
    # v1 named outright (no autodetection, which fails on the fresh /sys
    # of a network namespace) at an empty mount point it never uses.
    mkdir -p "$SLURM_DIR/cgroup"
    printf 'CgroupPlugin=cgroup/v1\nCgroupMountpoint=%s\nConstrainCores=no\nConstrainRAMSpace=no\nConstrainDevices=no\n' \
        "$SLURM_DIR/cgroup" >"$SLURM_DIR/cgroup.conf"
    SLURM_PIDS=()
    # netns_exec execs: $! is the daemon itself.
    netns_exec "$CLUSTER" n0 slurmctld -D -i -f "$SLURM_CONF" >"$SLURM_DIR/slurmctld.out" 2>&1 &
    SLURM_PIDS+=($!)
    slurm_start_slurmd n0
    slurm_start_slurmd n1
    # Both nodes idle, or skip with slurmctld's and slurmd's last words.
    local i state=""
    for i in $(seq 100); do
        state=$(slurm_on n0 sinfo -h -N -o '%N %t' 2>/dev/null | sort | tr '\n' ' ')
        [ "$state" = "n0 idle n1 idle " ] && break
        sleep 0.2
    done
    if [ "$state" != "n0 idle n1 idle " ]; then
        fail "$name: slurmctld and two slurmd come up (sinfo: ${state:-nothing})"
        tail -n 5 "$SLURM_DIR"/*.log "$SLURM_DIR"/*.out 2>/dev/null | sed 's/^/# /'
        exit 1
    fi
    REPORT=$TOP/tests/amlrun/report.sh
}

# slurm_start_slurmd NODE: slurmd -D on NODE with a /tmp of its own (the
# bind mount lives in the mount namespace `ip netns exec` made for it, so
# it goes with slurmd).  What the jobs need from the real /tmp stays
# reachable in it: this test's directory, and the checkout and the build
# when they live there too (git clone ... /tmp/x).
slurm_start_slurmd() {
    local node=$1 nt=$SLURM_DIR/$1/tmp keep=() p top
    for p in "$TEST_TMP" "$TOP" "$BUILD"; do
        case $p in /tmp/?*) ;; *) continue ;; esac
        top=${p#/tmp/}; top=${top%%/*}
        printf '%s\n' "${keep[@]}" | grep -qxF "$top" || keep+=("$top")
    done
    netns_exec "$CLUSTER" "$node" /bin/sh -c '
        nt=$1 n=$2; shift 2
        while [ "$n" -gt 0 ]; do
            mkdir -p "$nt/$1" && mount --bind "/tmp/$1" "$nt/$1" || exit 1
            shift; n=$((n - 1))
        done
        mount --rbind "$nt" /tmp || exit 1
        exec "$@"' sh "$nt" "${#keep[@]}" "${keep[@]}" slurmd -D -N "$node" -f "$SLURM_CONF" \
        >"$SLURM_DIR/slurmd.$node.out" 2>&1 &
    SLURM_PIDS+=($!)
}

# slurm_on NODE CMD...: a client command on a node of the cluster.
slurm_on() { on "$@"; }

# Jobs first (scancel, so that no step is left), then the daemons by PID,
# SIGTERM then SIGKILL.
slurm_stop() {
    [ -n "${SLURM_PIDS+x}" ] && [ "${#SLURM_PIDS[@]}" -gt 0 ] || return 0
    on n0 timeout 5 scancel --quiet --user=root 2>/dev/null
    local pid i
    kill -TERM "${SLURM_PIDS[@]}" 2>/dev/null
    for i in $(seq 50); do
        for pid in "${SLURM_PIDS[@]}"; do
            kill -0 "$pid" 2>/dev/null && break
            pid=""
        done
        [ -z "$pid" ] && break
        sleep 0.1
    done
    kill -KILL "${SLURM_PIDS[@]}" 2>/dev/null
    wait "${SLURM_PIDS[@]}" 2>/dev/null
    SLURM_PIDS=()
}

# want_slurm_layout MASTER PORT WORLD HOST:NODE:RANK:LRANK:LWORLD...: the
# report lines in rank order.
want_slurm_layout() {
    local master=$1 port=$2 world=$3 spec host node rank lrank lworld
    shift 3
    for spec in "$@"; do
        IFS=: read -r host node rank lrank lworld <<<"$spec"
        printf '%s RANK=%s LOCAL_RANK=%s NODE_RANK=%s WORLD_SIZE=%s LOCAL_WORLD_SIZE=%s MASTER_ADDR=%s MASTER_PORT=%s\n' \
            "$host" "$rank" "$lrank" "$node" "$world" "$lworld" "$master" "$port"
    done
}

# Report lines sorted by rank.
by_rank() { grep -E '^n[0-9] RANK=' | sort -t= -k2,2n; }

# Processes left on any node other than the Slurm daemons (slurmctld forks
# slurmscriptd), as "pid command" lines.
slurm_leftovers() {
    local p comm
    for p in $(cluster_pids); do
        comm=$(cat "/proc/$p/comm" 2>/dev/null) || continue
        case $comm in slurmctld|slurmscriptd|slurmd) continue ;; esac
        printf '%s %s\n' "$p" "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"
    done
}

# slurm_args CMD... -- ARG...: the srun arguments ARG with every word CMD
# replaced by the command words, one argument a line (a heterogeneous step
# names its command in each component: -w n1 -n1 CMD : -w n0 -n2 CMD).
slurm_args() {
    local cmd=() a
    while [ "$1" != -- ]; do cmd+=("$1"); shift; done
    shift
    for a in "$@"; do
        if [ "$a" = CMD ]; then printf '%s\n' "${cmd[@]}"; else printf '%s\n' "$a"; fi
    done
}

# What srun said but its queueing lines, as a diagnostic.
slurm_stderr() {
    local e
    e=$(grep -v '^srun: job [0-9]* ' "$TEST_TMP/err" | head -c 600)
    [ -z "$e" ] || diag "stderr: $e"
}

# slurm_step NAME HOSTS SRUN_ARG...: one srun layout, HOSTS the host of each
# rank in rank order ("n1 n0 n0"), checked three ways, with CMD in SRUN_ARG
# where the command goes:
#   - what Slurm did: each task's host, SLURM_LOCALID and SLURM_NODEID;
#     the hosts must be HOSTS, and from them follow the local world sizes
#     (tasks per host) and the master (the host of rank 0);
#   - what amlrun exports (srun amlrun tests/amlrun/report.sh);
#   - what amldist_init derives (examples/hello), and that rank 0 is
#     reachable there (examples/bootstrap_hello: every rank gets its line).
# Sets SLURM_WANT (the report lines) for a DDP check after it.
slurm_step() {
    local name=$1 hosts=$2 args=() a
    shift 2
    local view=$TEST_TMP/view
    mkdir -p "$view"; rm -f "$view"/*
    mapfile -t args < <(slurm_args sh -c 'echo "$(hostname) $SLURM_LOCALID $SLURM_NODEID" >"$0.$SLURM_PROCID"' "$view/t" -- "$@")
    slurm_on n0 $T srun "${args[@]}" >/dev/null 2>"$TEST_TMP/err" ||
        diag "$name: srun: $(head -c 400 "$TEST_TMP/err")"
    local n=0 got_hosts="" master="" line h lr nid
    declare -A on
    while [ -e "$view/t.$n" ]; do
        read -r h lr nid <"$view/t.$n"
        got_hosts+="${got_hosts:+ }$h"
        [ "$n" = 0 ] && master=$h
        on[$h]=$((${on[$h]:-0} + 1))
        n=$((n + 1))
    done
    expect_eq "$name: Slurm puts ranks 0..$((n - 1)) on $hosts" "$got_hosts" "$hosts"
    SLURM_WANT=""
    for ((a = 0; a < n; a++)); do
        read -r h lr nid <"$view/t.$a"
        SLURM_WANT+="$h RANK=$a LOCAL_RANK=$lr NODE_RANK=$nid WORLD_SIZE=$n LOCAL_WORLD_SIZE=${on[$h]} MASTER_ADDR=$master MASTER_PORT=29500"$'\n'
    done
    SLURM_WANT=${SLURM_WANT%$'\n'}

    mapfile -t args < <(slurm_args "$AMLRUN" "$REPORT" -- "$@")
    local out
    out=$(slurm_on n0 $T srun "${args[@]}" 2>"$TEST_TMP/err")
    expect_eq "$name: amlrun exports rank 0's host as MASTER_ADDR" "$(by_rank <<<"$out")" "$SLURM_WANT"
    slurm_stderr

    rm -f "$view"/*
    mapfile -t args < <(slurm_args sh -c 'echo "$(hostname) $("$1")" >"$0.$SLURM_PROCID"' "$view/h" "$BUILD/examples/hello" -- "$@")
    slurm_on n0 $T srun "${args[@]}" >/dev/null 2>"$TEST_TMP/err"
    out=$(for ((a = 0; a < n; a++)); do
        tr '\n' ' ' <"$view/h.$a" 2>/dev/null | awk '{
            for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
            printf "%s RANK=%s LOCAL_RANK=%s NODE_RANK=%s WORLD_SIZE=%s LOCAL_WORLD_SIZE=%s MASTER_ADDR=%s MASTER_PORT=%s\n",
                $1, v["RANK"], v["LOCAL_RANK"], v["NODE_RANK"], v["WORLD_SIZE"], v["LOCAL_WORLD_SIZE"], v["MASTER_ADDR"], v["MASTER_PORT"] }'
    done)
    expect_eq "$name: amldist_init derives the same layout" "$out" "$SLURM_WANT"
    slurm_stderr

    mapfile -t args < <(slurm_args "$BUILD/examples/bootstrap_hello" -- "$@")
    out=$(slurm_on n0 $T srun "${args[@]}" 2>"$TEST_TMP/err" | grep -c "got: hello from rank 0 (pid [0-9]* on $master)")
    expect_eq "$name: every rank gets rank 0's line through the master ($master)" "$out" "$n"
}

# slurm_ddp NAME SRUN_ARG...: a gloo DDP job (tests/amlrun/ddp_replicas.py
# under srun amlrun) on the layout slurm_step checked last: every rank
# trains and agrees, on the host SLURM_WANT says.
slurm_ddp() {
    local name=$1 args=() dir=$TEST_TMP/ddp.$RANDOM
    shift
    mkdir -p "$dir"
    mapfile -t args < <(slurm_args "$AMLRUN" --python "$TORCH_PY" "$TOP/tests/amlrun/ddp_replicas.py" -- "$@")
    DDP_OUT=$dir/rank slurm_on n0 $T srun --kill-on-bad-exit=1 "${args[@]}" >/dev/null 2>"$TEST_TMP/err"
    diag "$name: srun status $?"
    local want got n
    n=$(grep -c . <<<"$SLURM_WANT")
    want=$(sed -E 's/^(n[0-9]+) RANK=([0-9]+) LOCAL_RANK=[0-9]+ NODE_RANK=([0-9]+) .*/\1 rank=\2\/'"$n"' node=\3 agree=True trained=True/' <<<"$SLURM_WANT")
    got=$(cat "$dir"/rank.* 2>/dev/null | sort -t= -k2,2n)
    if [ "$got" = "$want" ]; then ok "$name"
    else fail "$name"; diag "got: $got"; diag "want: $want"; diag "stderr: $(tail -c 1500 "$TEST_TMP/err")"; fi
}
