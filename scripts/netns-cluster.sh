#!/usr/bin/env bash
# netns-cluster.sh: a throw-away cluster of K "nodes" (default 2, at most 4)
# on this machine, for multi-node tests of amlrun and libamldist.
#
# Each node is a network namespace with its own address on a private bridge,
# loopback up, and a host name n0..nK-1 that resolves in every node (through
# /etc/netns/<ns>/hosts, which `ip netns exec` bind-mounts over /etc/hosts).
# Commands run on a node get a UTS namespace too, so `hostname` says n1 there.
# The bridge has no address in the host namespace: nothing on a node can
# reach the host or the outside, and clusters never see each other.
#
#   netns-cluster.sh up [-n K] [--owner PID]  create; prints `export ...` lines
#   netns-cluster.sh exec [--login] NODE CMD... run CMD on node NODE (n1 or 1)
#   netns-cluster.sh pids NODE                  list the pids on a node
#   netns-cluster.sh kill NODE [SIG]            signal every process of a node
#   netns-cluster.sh down [ID]                  remove a cluster and its processes
#   netns-cluster.sh reap                       remove clusters whose owner died
#   netns-cluster.sh list                       the clusters that exist
#
# ID defaults to $AMLDIST_NETNS_CLUSTER, which `eval "$(... up)"` sets along
# with the Open MPI settings: plm_rsh_agent = scripts/ompi-rsh-agent (so
# `mpirun --host n0:2,n1:2` starts its daemons through `ip netns exec`) and
# oob/btl TCP restricted to the cluster subnet.  Run mpirun on a node
# (`exec n0 mpirun ...`), as on a real head node: the host namespace has no
# route to the nodes.  --login gives CMD the clean environment an ssh login
# would (PATH, LD_LIBRARY_PATH, HOME and a few more), not the caller's.
#
# Nodes are n<i> with address 10.231.0.1<i>/24; namespaces are <ID>-n<i>,
# the bridge <ID>-br, the host ends of the veth pairs <ID>-v<i>.  State lives
# in $AMLDIST_NETNS_RUNDIR (default /run/amldist-netns)/<ID>: the owner pid
# (a cluster whose owner is gone is reaped by the next `up`) and the hosts file.
#
# Sourced from a test (. scripts/netns-cluster.sh), it defines cluster_up,
# on, cluster_down and friends; cluster_up installs a trap that tears the
# cluster down on exit, error, SIGINT, SIGTERM or SIGHUP.  Needs root (or
# CAP_SYS_ADMIN + CAP_NET_ADMIN), iproute2 and util-linux.

NETNS_RUNDIR=${AMLDIST_NETNS_RUNDIR:-/run/amldist-netns}
NETNS_SUBNET=10.231.0.0/24
NETNS_MAX=4
NETNS_SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

netns_die() { echo "netns-cluster: $*" >&2; exit 1; }
netns_addr() { echo "10.231.0.1$1"; }

# netns_owner_tag PID: pid plus its start time, so a recycled pid is not
# mistaken for a live owner.
netns_owner_tag() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    # shellcheck disable=SC2086
    set -- $stat
    echo "${20}"   # field 22, starttime
}

netns_owner_alive() {
    local dir=$1 pid tag
    read -r pid tag <"$dir/owner" 2>/dev/null || return 1
    [ "$(netns_owner_tag "$pid")" = "$tag" ]
}

# netns_node ID NODE: namespace name of node "n1" / "1" / its address.
netns_node() {
    local id=$1 node=$2 i
    node=${node#*@}
    case $node in
        n[0-9]) i=${node#n} ;;
        [0-9]) i=$node ;;
        10.231.0.1[0-9]) i=${node#10.231.0.1} ;;
        *) echo "netns-cluster: unknown node '$node' (want n0..n$((NETNS_MAX - 1)) or its address)" >&2
           return 1 ;;
    esac
    if [ ! -e "/run/netns/$id-n$i" ]; then
        echo "netns-cluster: cluster '$id' has no node n$i" >&2
        return 1
    fi
    echo "$i"
}

netns_env() {
    local id=$1
    cat <<EOF
export AMLDIST_NETNS_CLUSTER=$id
export AMLDIST_NETNS_RUNDIR=$NETNS_RUNDIR
export OMPI_MCA_plm_rsh_agent=$NETNS_SCRIPTS/ompi-rsh-agent
export OMPI_MCA_oob_tcp_if_include=$NETNS_SUBNET
export OMPI_MCA_btl_tcp_if_include=$NETNS_SUBNET
EOF
}

netns_up() {
    local k=2 owner=$PPID
    while [ $# -gt 0 ]; do
        case $1 in
            -n) k=$2; shift 2 ;;
            --owner) owner=$2; shift 2 ;;
            *) netns_die "up: unknown option '$1'" ;;
        esac
    done
    case $k in [1-9]) ;; *) netns_die "up: -n wants 1..$NETNS_MAX, not '$k'" ;; esac
    [ "$k" -le "$NETNS_MAX" ] || netns_die "up: -n wants 1..$NETNS_MAX, not '$k'"
    netns_reap
    # 8 characters, so "<id>-br" fits the 15 of an interface name; drawn
    # again when taken (clusters of other tests and other suites live on).
    local id dir n=0
    mkdir -p "$NETNS_RUNDIR" || netns_die "up: cannot create $NETNS_RUNDIR"
    while :; do
        id=amn$(printf '%05x' $((($$ ^ RANDOM << 4 ^ RANDOM) & 0xfffff)))
        dir=$NETNS_RUNDIR/$id
        [ ! -e "/run/netns/$id-n0" ] && mkdir "$dir" 2>/dev/null && break
        ((n++ < 20)) || netns_die "up: cannot create a cluster directory in $NETNS_RUNDIR"
    done
    local tag
    tag=$(netns_owner_tag "$owner") || { rmdir "$dir"; netns_die "up: no process $owner"; }
    echo "$owner $tag" >"$dir/owner"
    {
        printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n'
        local i
        for ((i = 0; i < k; i++)); do printf '%s\tn%s\n' "$(netns_addr $i)" $i; done
    } >"$dir/hosts"
    # Undo a half-built cluster if any step fails.
    if ! netns_build "$id" "$k"; then
        netns_down "$id"
        netns_die "up: cannot build the cluster (need root with CAP_NET_ADMIN and CAP_SYS_ADMIN)"
    fi
    netns_env "$id"
}

netns_build() {
    local id=$1 k=$2 i ns
    ip link add "$id-br" type bridge || return 1
    ip link set "$id-br" up || return 1
    for ((i = 0; i < k; i++)); do
        ns=$id-n$i
        ip netns add "$ns" || return 1
        mkdir -p "/etc/netns/$ns" && cp "$NETNS_RUNDIR/$id/hosts" "/etc/netns/$ns/hosts" || return 1
        ip link add "$id-v$i" type veth peer name eth0 netns "$ns" || return 1
        ip link set "$id-v$i" master "$id-br" up || return 1
        ip -n "$ns" addr add "$(netns_addr $i)/24" dev eth0 || return 1
        ip -n "$ns" link set lo up || return 1
        ip -n "$ns" link set eth0 up || return 1
    done
    # Wait out duplicate address detection so nothing starts on a link that
    # is not forwarding yet.
    for ((i = 0; i < k; i++)); do
        local n=0
        until ip -n "$id-n$i" -br link show eth0 | grep -q ' UP '; do
            ((n++ < 100)) || return 1
            sleep 0.05
        done
    done
}

netns_pids() { ip netns pids "$1" 2>/dev/null; }

# The namespace's processes, parents before their children: by start time,
# then by depth below the namespace's first process (pids wrap, at 32768 on
# a small machine, and a child may start in its parent's clock tick).  A
# node that dies must die as one: a process with SIGKILL pending runs no
# more code, so a supervisor killed before its workers cannot report their
# deaths as failures of its own.
netns_pids_oldest_first() {
    local p line f
    for p in $(netns_pids "$1"); do
        read -r line <"/proc/$p/stat" 2>/dev/null || continue
        # after the command name, which may hold blanks: state ppid ...
        read -ra f <<<"${line##*) }"
        echo "$p ${f[1]} ${f[19]}"
    done | awk '{ pp[$1] = $2; st[$1] = $3; id[++n] = $1 }
        END { for (i = 1; i <= n; i++) {
                  d = 0
                  for (p = pp[id[i]]; (p in pp) && d < n; p = pp[p]) d++
                  print st[id[i]], d, id[i] } }' | sort -k1,1n -k2,2n | cut -d' ' -f3
}

# Kill every process in the namespace until none is left: processes may fork
# while we kill, so repeat.
netns_kill_all() {
    local ns=$1 n=0 pids
    while pids=$(netns_pids_oldest_first "$ns") && [ -n "$pids" ]; do
        # shellcheck disable=SC2086
        kill -KILL $pids 2>/dev/null
        ((n++ < 200)) || { echo "netns-cluster: processes survive in $ns: $pids" >&2; return 1; }
        sleep 0.05
    done
}

netns_down() {
    local id=$1 ns rc=0
    case $id in amn*) ;; *) netns_die "down: '$id' is not a cluster id" ;; esac
    for ns in /run/netns/"$id"-n*; do
        [ -e "$ns" ] || continue
        ns=${ns##*/}
        netns_kill_all "$ns" || rc=1
        ip netns del "$ns" 2>/dev/null || rc=1
        rm -rf "/etc/netns/$ns"
    done
    local link
    for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep "^$id-"); do
        ip link del "$link" 2>/dev/null
    done
    rm -rf "/etc/netns/$id"-n* "${NETNS_RUNDIR:?}/$id"
    return $rc
}

netns_reap() {
    local dir
    for dir in "$NETNS_RUNDIR"/amn*; do
        [ -d "$dir" ] || continue
        netns_owner_alive "$dir" || netns_down "${dir##*/}"
    done
}

netns_list() {
    local dir pid
    for dir in "$NETNS_RUNDIR"/amn*; do
        [ -d "$dir" ] || continue
        read -r pid _ <"$dir/owner" 2>/dev/null
        printf '%s nodes=%s owner=%s%s\n' "${dir##*/}" \
            "$(ls -d /run/netns/"${dir##*/}"-n* 2>/dev/null | wc -l)" "$pid" \
            "$(netns_owner_alive "$dir" || echo ' (gone)')"
    done
}

# The environment an ssh login would give: what a node's profile sets, plus
# what Open MPI needs as root and what finds this cluster again.
NETNS_LOGIN_VARS="PATH LD_LIBRARY_PATH HOME USER LOGNAME SHELL LANG LC_ALL TERM TMPDIR
OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM AMLDIST_NETNS_CLUSTER AMLDIST_NETNS_RUNDIR"

netns_exec() {
    local id=$1 login=0
    shift
    [ "${1:-}" = --login ] && { login=1; shift; }
    [ $# -ge 2 ] || netns_die "exec: usage: exec [--login] NODE CMD..."
    local i
    i=$(netns_node "$id" "$1") || exit 1
    shift
    local envcmd=()
    if [ $login = 1 ]; then
        envcmd=(env -i)
        local v
        for v in $NETNS_LOGIN_VARS; do
            [ -n "${!v+x}" ] && envcmd+=("$v=${!v}")
        done
    fi
    # The new UTS namespace only carries the host name: `hostname` and
    # gethostname() answer n<i>, which resolves to the node's own address.
    exec ip netns exec "$id-n$i" "${envcmd[@]}" unshare --uts \
        /bin/sh -c 'hostname "$0" && exec "$@"' "n$i" "$@"
}

# ---- helpers for tests that source this file --------------------------------

# cluster_up K: create a K-node cluster owned by this shell, export its
# settings, and make sure it is torn down however the test ends.  Returns 1
# (with a reason in NETNS_SKIP) when namespaces cannot be made here.
cluster_up() {
    NETNS_SKIP=
    if ! ip netns add "amnprobe$$" 2>/dev/null; then
        NETNS_SKIP="cannot create network namespaces here (ip netns add: not permitted?)"
        return 1
    fi
    ip netns del "amnprobe$$"
    local out
    out=$(exec 9>>"$NETNS_RUNDIR.lock"; flock 9; netns_up -n "${1:-2}" --owner $$) || { NETNS_SKIP="cluster setup failed"; return 1; }
    eval "$out"
    CLUSTER=$AMLDIST_NETNS_CLUSTER
    local prev
    prev=$(trap -p EXIT | sed "s/^trap -- '\(.*\)' EXIT$/\1/")
    # shellcheck disable=SC2064
    trap "cluster_down; $prev" EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP
}

cluster_down() {
    [ -n "${CLUSTER:-}" ] || return 0
    netns_down "$CLUSTER"
    CLUSTER=
}

# on NODE CMD...: run CMD on a node of this test's cluster (in a subshell,
# since netns_exec execs).
on() { (netns_exec "$CLUSTER" "$@"); }
on_login() { (netns_exec "$CLUSTER" --login "$@"); }
node_addr() { netns_addr "${1#n}"; }
# Processes left on any node of the cluster.
cluster_pids() {
    local ns
    for ns in /run/netns/"$CLUSTER"-n*; do netns_pids "${ns##*/}"; done
}

# ---- command line -----------------------------------------------------------

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -u
    cmd=${1:-}
    [ $# -gt 0 ] && shift
    cur=${AMLDIST_NETNS_CLUSTER:-}
    need_id() { [ -n "$cur" ] || netns_die "$cmd: no cluster (set AMLDIST_NETNS_CLUSTER)"; }
    # (braces: a bare `exec 2>/dev/null` would silence the rest of the script)
    { exec 9>>"$NETNS_RUNDIR.lock"; } 2>/dev/null
    case $cmd in
        up) flock 9; netns_up "$@" ;;
        down) flock 9; [ $# -gt 0 ] && cur=$1; need_id; netns_down "$cur" ;;
        reap) flock 9; netns_reap ;;
        list) netns_list ;;
        exec) exec 9>&-; need_id; netns_exec "$cur" "$@" ;;
        pids) need_id; i=$(netns_node "$cur" "${1:?NODE}") && netns_pids "$cur-n$i" ;;
        kill)
            need_id
            i=$(netns_node "$cur" "${1:?NODE}") || exit 1
            pids=$(netns_pids_oldest_first "$cur-n$i")
            # shellcheck disable=SC2086
            [ -z "$pids" ] || kill -"${2:-KILL}" $pids ;;
        *) sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2; exit 2 ;;
    esac
fi
