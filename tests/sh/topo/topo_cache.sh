#!/usr/bin/env bash
# The per-node topology cache with real amlrun runs on this machine: every
# run's --report-bindings=json must be what the same run gives with the
# cache off (AMLDIST_TOPOLOGY_CACHE=0), whatever happened in between: the
# affinity changed by taskset, the cgroup's cpuset narrowed, a PCI device
# hidden, an XML of another machine planted as the cache file, ranks and
# nested amlruns filling it together.  AMLDIST_TEST_TOPOLOGY_CACHE_LOG
# records each process's decision (hit, miss and why, store).
. "$(dirname "$0")/../../lib.sh"
if [ ! -x "$AMLRUN" ]; then fail "topology cache: $AMLRUN not built"; exit 0; fi
unset OMP_NUM_THREADS CUDA_VISIBLE_DEVICES NVIDIA_VISIBLE_DEVICES HWLOC_XMLFILE
unset AMLDIST_TOPOLOGY_CACHE
export OMP_NUM_THREADS=1
CACHE=$TEST_TMP/cache
LOG=$TEST_TMP/cache.log
export AMLDIST_TEST_TOPOLOGY_CACHE_LOG=$LOG
fixtures=${AMLDIST_TOPOLOGIES:-$TOP/tests/topologies/real}

mine=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
set -- $("$TORCH_PY" -c '
import sys
for part in sys.argv[1].split(","):
    a, _, b = part.partition("-")
    print(*range(int(a), int(b or a) + 1))' "$mine" | tr '\n' ' ')
first=$1; last=${!#}; ncpu=$#

# bindings FILE CMD...: the sorted JSON lines of a run (its stderr), CMD
# being amlrun's command line up to the program, which is /bin/true.
bindings() {
    local file=$1; shift
    if ! timeout 60 "$@" --report-bindings=json /bin/true >/dev/null 2>"$file.err"; then
        fail "run: $*"; sed 's/^/# /' "$file.err" | tail -5
    fi
    grep '^{' "$file.err" | sort >"$file"
}
# same_as NAME A B: the runs A and B reported the same, non-empty bindings.
same_as() {
    if [ -s "$2" ] && cmp -s "$2" "$3"; then ok "$1"; else
        fail "$1"; diff "$2" "$3" | sed 's/^/# /'; fi
}
# same NAME CMD...: the run gives the same bindings with the cache (twice:
# filling it, then from it) as without, and the second one is a hit.
same() {
    local name=$1; shift
    bindings "$TEST_TMP/off" env AMLDIST_TOPOLOGY_CACHE=0 "$@"
    : >"$LOG"
    bindings "$TEST_TMP/on1" env AMLDIST_TOPOLOGY_CACHE="$CACHE" "$@"
    bindings "$TEST_TMP/on2" env AMLDIST_TOPOLOGY_CACHE="$CACHE" "$@"
    if [ ! -s "$TEST_TMP/off" ]; then
        fail "$name: no bindings reported"; return
    fi
    if cmp -s "$TEST_TMP/off" "$TEST_TMP/on1" && cmp -s "$TEST_TMP/off" "$TEST_TMP/on2"; then
        ok "$name: same bindings with the cache"
    else
        fail "$name: same bindings with the cache"
        diff "$TEST_TMP/off" "$TEST_TMP/on1" | sed 's/^/# /'
        diff "$TEST_TMP/off" "$TEST_TMP/on2" | sed 's/^/# /'
    fi
    check "$name: the second run used the cache" \
        test "$(tail -1 "$LOG" | cut -d' ' -f1)" = hit
}

same "1 rank" "$AMLRUN" --nproc-per-node 1
same "2 ranks" "$AMLRUN" --nproc-per-node 2
same "3 ranks, numa" "$AMLRUN" --nproc-per-node 3 --cpu-bind numa
same "2 ranks, socket, mem local" "$AMLRUN" --nproc-per-node 2 --cpu-bind socket --mem-bind local
same "--cpu-bind none (NIC export)" "$AMLRUN" --nproc-per-node 2 --cpu-bind none
same "NVIDIA_VISIBLE_DEVICES=void" env NVIDIA_VISIBLE_DEVICES=void "$AMLRUN" --nproc-per-node 2
same "CUDA_VISIBLE_DEVICES=0" env CUDA_VISIBLE_DEVICES=0 "$AMLRUN" --nproc-per-node 2
name=$(sed -n 's/^hit \(topo-[^ ]*\.xml\).*/\1/p' "$LOG" | tail -1)
check "the cache file is named by the host and boot id" \
    grep -q "^topo-$(hostname | tr -- - _)-$(cat /proc/sys/kernel/random/boot_id)-" <<<"$name"

# The affinity changed between runs (taskset): one cache entry serves
# them all, and each run binds within its own cpus.
if have taskset; then
    for cpus in "$last" "$first" "$first,$last" "$last" "$mine"; do
        same "taskset -c $cpus" taskset -c "$cpus" "$AMLRUN" --nproc-per-node 2
    done
    check "taskset: one entry for all affinities" \
        test "$(ls "$CACHE" | grep -c '^topo-')" = 1
    bindings "$TEST_TMP/t1" env AMLDIST_TOPOLOGY_CACHE="$CACHE" taskset -c "$last" "$AMLRUN" --nproc-per-node 1
    check "taskset -c $last from the cache: bound to cpu $last" \
        grep -q "\"cpus\":\"$last\"" "$TEST_TMP/t1"
else
    skip "taskset changes" "taskset not installed"
fi

# AMLDIST_TOPOLOGY_CACHE=0 writes nothing; unset, the cache is under a
# private XDG_RUNTIME_DIR.
xdg=$TEST_TMP/xdg
mkdir -m 0700 "$xdg"
XDG_RUNTIME_DIR=$xdg AMLDIST_TOPOLOGY_CACHE=0 timeout 60 "$AMLRUN" --nproc-per-node 2 /bin/true
# (amlrun/ beside it is the --status socket's directory, not the cache)
check "AMLDIST_TOPOLOGY_CACHE=0 writes nothing" test ! -e "$xdg/amldist"
XDG_RUNTIME_DIR=$xdg timeout 60 "$AMLRUN" --nproc-per-node 2 /bin/true
check "by default, the cache is in \$XDG_RUNTIME_DIR/amldist (0700)" \
    test "$(stat -c %a "$xdg/amldist" 2>/dev/null)" = 700

# Every binding off: the topology is not read at all.
: >"$LOG"
AMLDIST_TOPOLOGY_CACHE=$TEST_TMP/unused timeout 60 "$AMLRUN" --nproc-per-node 2 \
    --cpu-bind none --mem-bind none --nic-bind none --gpu-bind none /bin/true
check "binding off: no topology, no cache" \
    test ! -e "$TEST_TMP/unused" -a ! -s "$LOG"

# An XML export of another machine planted as the cache file is refused.
if [ -n "$name" ] && [ -f "$fixtures/aws-ofi-nccl/p4d-topology.xml" ]; then
    cp "$fixtures/aws-ofi-nccl/p4d-topology.xml" "$CACHE/$name"
    chmod 600 "$CACHE/$name"
    bindings "$TEST_TMP/off" env AMLDIST_TOPOLOGY_CACHE=0 "$AMLRUN" --nproc-per-node 2
    : >"$LOG"
    bindings "$TEST_TMP/on1" env AMLDIST_TOPOLOGY_CACHE="$CACHE" "$AMLRUN" --nproc-per-node 2
    check "planted p4d XML: refused" grep -q "not a topology cache entry" "$LOG"
    same_as "planted p4d XML: this machine's bindings" "$TEST_TMP/off" "$TEST_TMP/on1"
else
    skip "planted XML" "no cache entry name or no fixture"
fi

# The ranks of mpirun fill the cache once and bind as without it.
if have mpirun; then
    fresh=$TEST_TMP/mpi-cache
    bindings "$TEST_TMP/off" $MPIRUN -np 2 -x AMLDIST_TOPOLOGY_CACHE=0 --bind-to core "$AMLRUN"
    : >"$LOG"
    bindings "$TEST_TMP/on1" $MPIRUN -np 2 -x AMLDIST_TOPOLOGY_CACHE="$fresh" \
        -x AMLDIST_TEST_TOPOLOGY_CACHE_LOG --bind-to core "$AMLRUN"
    same_as "mpirun -np 2 amlrun: same bindings with the cache" \
        "$TEST_TMP/off" "$TEST_TMP/on1"
    expect_eq "mpirun -np 2 amlrun: the first rank discovers, once" \
        "$(grep -c '^store' "$LOG")" 1
else
    skip "mpirun ranks" "mpirun not installed"
fi

# A per-process amlrun under a per-node one does not discover again.
fresh=$TEST_TMP/nested-cache
: >"$LOG"
AMLDIST_TOPOLOGY_CACHE=$fresh timeout 60 "$AMLRUN" --nproc-per-node 2 \
    "$AMLRUN" --report-bindings=json /bin/true >/dev/null 2>"$TEST_TMP/nested.err" ||
    fail "nested amlrun: exit status"
expect_eq "nested amlrun: one discovery for the node" \
    "$(grep -c '^store' "$LOG") $(grep -c '^hit' "$LOG")" "1 2"

# The cgroup's cpuset narrowed (a job's cgroup): the cached topology of the
# whole machine is not used inside it.
cg=
if [ "$(id -u)" = 0 ] && [ "$ncpu" -ge 2 ]; then
    for d in /sys/fs/cgroup/cpuset /sys/fs/cgroup; do
        if [ -f "$d/cpuset.cpus" ] || [ -f "$d/cpuset.cpus.effective" ]; then
            cg=$d/amldist-test-$$
            mkdir "$cg" 2>/dev/null || { cg=; continue; }
            mems=$(cat "$d/cpuset.mems.effective" 2>/dev/null || cat "$d/cpuset.mems")
            if echo "$last" >"$cg/cpuset.cpus" 2>/dev/null &&
                echo "$mems" >"$cg/cpuset.mems" 2>/dev/null; then break; fi
            rmdir "$cg"; cg=
        fi
    done
fi
if [ -n "$cg" ]; then
    trap 'rmdir "$cg" 2>/dev/null; rm -rf "$TEST_TMP"' EXIT
    incg=$TEST_TMP/incg # runs its command inside the cgroup
    printf '#!/bin/sh\necho $$ >"%s/cgroup.procs" && exec "$@"\n' "$cg" >"$incg"
    chmod +x "$incg"
    bindings "$TEST_TMP/outside" env AMLDIST_TOPOLOGY_CACHE="$CACHE" "$AMLRUN" --nproc-per-node 1
    : >"$LOG"
    bindings "$TEST_TMP/off" "$incg" env AMLDIST_TOPOLOGY_CACHE=0 "$AMLRUN" --nproc-per-node 1
    bindings "$TEST_TMP/on1" "$incg" env AMLDIST_TOPOLOGY_CACHE="$CACHE" "$AMLRUN" --nproc-per-node 1
    check "cpuset $last: the whole machine's entry is not used" \
        grep -q '^miss .*none yet' "$LOG"
    check "cpuset $last: bound to cpu $last, as without the cache" \
        grep -q "\"cpus\":\"$last\"" "$TEST_TMP/on1"
    same_as "cpuset $last: same bindings with the cache" "$TEST_TMP/off" "$TEST_TMP/on1"
    bindings "$TEST_TMP/on2" "$incg" env AMLDIST_TOPOLOGY_CACHE="$CACHE" "$AMLRUN" --nproc-per-node 1
    same_as "cpuset $last: its own entry, used next time" "$TEST_TMP/off" "$TEST_TMP/on2"
    # Per-process mode plans over the node's allowed cpus (the cgroup's),
    # not its own affinity: a stale entry would bind outside the cpuset.
    rm -f "$CACHE"/topo-*
    pp="env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1"
    bindings "$TEST_TMP/outside" env AMLDIST_TOPOLOGY_CACHE="$CACHE" $pp "$AMLRUN"
    bindings "$TEST_TMP/off" "$incg" env AMLDIST_TOPOLOGY_CACHE=0 $pp "$AMLRUN"
    bindings "$TEST_TMP/on1" "$incg" env AMLDIST_TOPOLOGY_CACHE="$CACHE" $pp "$AMLRUN"
    same_as "cpuset $last, per-process mode: same bindings with the cache" \
        "$TEST_TMP/off" "$TEST_TMP/on1"
    check "cpuset $last, per-process mode: bound to cpu $last" \
        grep -q "\"cpus\":\"$last\"" "$TEST_TMP/on1"
    bindings "$TEST_TMP/outside" env AMLDIST_TOPOLOGY_CACHE="$CACHE" "$AMLRUN" --nproc-per-node 1
    : >"$LOG"
    bindings "$TEST_TMP/on1" env AMLDIST_TOPOLOGY_CACHE="$CACHE" "$AMLRUN" --nproc-per-node 1
    same_as "outside the cpuset again: the machine's entry" \
        "$TEST_TMP/outside" "$TEST_TMP/on1"
    rmdir "$cg" 2>/dev/null || true
else
    skip "cpuset narrowed" "needs root, 2 cpus and a writable cpuset cgroup"
fi

# A PCI device hidden (as a container or a driver unbind would): in a
# mount namespace /sys/bus/pci/devices lacks it.  The entry written with
# it is not used, and the bindings are discovery's.  The device hidden is
# an NVIDIA GPU when there is one, else a network device's.
hide=
for d in /sys/bus/pci/devices/*; do
    if [ "$(cat "$d/vendor" 2>/dev/null)" = 0x10de ] &&
        case "$(cat "$d/class" 2>/dev/null)" in 0x0300*|0x0302*) true ;; *) false ;; esac; then
        hide=$(basename "$d"); break
    fi
done
if [ -z "$hide" ]; then
    for n in /sys/class/net/*; do
        dev=$(readlink -f "$n/device" 2>/dev/null) || continue
        while [ -n "$dev" ] && [ "$dev" != / ]; do
            case $(basename "$dev") in
                [0-9a-f][0-9a-f][0-9a-f][0-9a-f]:*:*.*) hide=$(basename "$dev"); break 2 ;;
            esac
            dev=$(dirname "$dev")
        done
    done
fi
if [ "$(id -u)" = 0 ] && have unshare && [ -n "$hide" ] &&
    unshare -m true 2>/dev/null; then
    hidden=$TEST_TMP/hidden # runs its command with $hide off the PCI bus
    cat >"$hidden" <<EOF
#!/bin/sh
exec unshare -m sh -c '
    t=$TEST_TMP/pci
    mkdir -p "\$t" && mount -t tmpfs none "\$t" || exit 97
    for d in /sys/bus/pci/devices/*; do
        [ "\$(basename "\$d")" = "$hide" ] ||
            ln -s "\$(readlink -f "\$d")" "\$t/\$(basename "\$d")"
    done
    mount --bind "\$t" /sys/bus/pci/devices || exit 97
    exec "\$@"' sh "\$@"
EOF
    chmod +x "$hidden"
    bindings "$TEST_TMP/outside" env AMLDIST_TOPOLOGY_CACHE="$CACHE" "$AMLRUN" --nproc-per-node 2
    : >"$LOG"
    bindings "$TEST_TMP/off" "$hidden" env AMLDIST_TOPOLOGY_CACHE=0 "$AMLRUN" --nproc-per-node 2
    bindings "$TEST_TMP/on1" "$hidden" env AMLDIST_TOPOLOGY_CACHE="$CACHE" "$AMLRUN" --nproc-per-node 2
    if grep -q '^off' "$LOG" && ! grep -q '^miss\|^hit' "$LOG"; then
        skip "PCI device $hide hidden" "could not hide it here"
    else
        check "PCI device $hide hidden: the entry written with it is not used" \
            grep -q '^miss .*none yet' "$LOG"
        same_as "PCI device $hide hidden: same bindings with the cache" \
            "$TEST_TMP/off" "$TEST_TMP/on1"
        if ! cmp -s "$TEST_TMP/outside" "$TEST_TMP/off"; then
            diag "(hiding $hide changes the bindings: $(tr '\n' ' ' <"$TEST_TMP/off" | cut -c1-160))"
        fi
        : >"$LOG"
        bindings "$TEST_TMP/on2" env AMLDIST_TOPOLOGY_CACHE="$CACHE" "$AMLRUN" --nproc-per-node 2
        same_as "PCI device $hide back: the machine's entry again" \
            "$TEST_TMP/outside" "$TEST_TMP/on2"
        check "PCI device $hide back: from the cache" grep -q '^hit' "$LOG"
    fi
else
    skip "PCI device hidden" "needs root, unshare and a PCI GPU or NIC"
fi
