#!/usr/bin/env bash
# torchrun 2.x's --numa-binding node|socket|exclusive|core-complex, planned
# by amlrun --dry-run on hwloc XMLs (the real Lassen, an L3 per core pair;
# the Azure NDm A100 v4 fixture, an L3 per 4-core CCX and two NUMA nodes a
# package).  Every expected cpu set is asked of hwloc-calc on the same XML:
# the GPU's NUMA node and package, the node's cores and L3 caches in hwloc's
# order, and their PUs; amlrun's own code is not consulted.
. "$(dirname "$0")/../../lib.sh"
if [ ! -x "$AMLRUN" ]; then fail "numa-binding: $AMLRUN not built"; exit 0; fi
if ! have hwloc-calc; then skip "numa-binding" "hwloc-calc not installed"; exit 0; fi
unset HWLOC_XMLFILE CUDA_VISIBLE_DEVICES NVIDIA_VISIBLE_DEVICES

calc() { hwloc-calc --if xml -i "$xml" "$@"; }
# Sorted PU list of some hwloc-calc locations (core:3 l3:1 ...), "a,b,c".
pus() { calc --po -I pu "$@"; }
# Expand "0-3,8" (amlrun's cpu list) the same way: "0,1,2,3,8" (in the
# shell: a Python for each of the hundred-odd lists cost seconds of CPU).
expand() {
    local part a b out=()
    for part in ${1//,/ }; do
        a=${part%-*} b=${part#*-}
        for ((; a <= b; a++)); do out+=("$a"); done
    done
    printf '%s\n' "${out[@]}" | sort -n | paste -sd,
}
nth() { echo "$1" | cut -d, -f"$(($2 + 1))"; }

# plan NAME ARGS...: amlrun's JSON report lines into $TEST_TMP/NAME, one
# "busid cpus" line per local rank, in local-rank order.
plan() {
    local name=$1; shift
    if ! "$AMLRUN" --dry-run --topology "$xml" --report-bindings=json "$@" \
            true >"$TEST_TMP/$name.raw" 2>"$TEST_TMP/$name.err"; then
        fail "$name: amlrun exits 0"; sed 's/^/# /' "$TEST_TMP/$name.err"
    fi
    "$TORCH_PY" -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
for r in sorted(rows, key=lambda r: r["local_rank"]):
    print(r["gpu_busid"], r["cpus"])' "$TEST_TMP/$name.raw" >"$TEST_TMP/$name"
}

# expected MODE: what torchrun's mode means, from hwloc-calc, for the ranks
# of $TEST_TMP/$name (rank j of a NUMA node: its j-th rank in local order).
expected() {
    local mode=$1 numa pkg cores n j block first l3s seen=" " numas
    # Each rank's NUMA node, asked once (not once per rank and rank).
    numas=$(while read -r b _; do calc -I numa "pci=$b"; done <"$TEST_TMP/$name")
    while read -r _ _ && read -r numa <&3; do
        # Ranks before this one on its node, and ranks on its node.
        j=$(grep -o " $numa:" <<<"$seen" | wc -l)
        n=$(grep -cx "$numa" <<<"$numas")
        seen="$seen$numa: "
        case $mode in
        node) pus "numa:$numa" ;;
        socket) pkg=$(calc -I package "numa:$numa"); pus "package:$pkg" ;;
        exclusive)
            cores=$(calc -I core "numa:$numa")
            block=$(( $(tr , '\n' <<<"$cores" | wc -l) / n ))
            first=$((j * block))
            pus $(for ((c = first; c < first + block; c++)); do
                echo "core:$(nth "$cores" "$c")"; done) ;;
        core-complex)
            l3s=$(calc -I l3 "numa:$numa")
            pus "l3:$(nth "$l3s" "$j")" ;;
        esac
    done <"$TEST_TMP/$name" 3<<<"$numas"
}

compare() { # compare LABEL MODE: amlrun's cpus against expected MODE
    local got=$TEST_TMP/$name.got
    while read -r _ cpus; do expand "$cpus"; done <"$TEST_TMP/$name" >"$got"
    expect_eq "$1" "$(cat "$got")" "$(expected "$2")"
}

lassen=$TOP/tests/topologies/real/mpibind/coral-lassen.xml
epyc=$TOP/tests/topologies/azure-ndm-a100-v4.xml
for xml in "$lassen" "$epyc"; do
    label=$(basename "$xml" .xml)
    check "$label: hwloc loads it" sh -c "lstopo --if xml -i '$xml' --of console >/dev/null"
    for mode in node socket exclusive core-complex; do
        name=$label-$mode
        plan "$name" --nproc-per-node gpu --numa-binding "$mode"
        compare "$label: --numa-binding $mode gives hwloc-calc's cpus" "$mode"
        # torchrun's spelling and the --cpu-bind policy it names agree.
        case $mode in node) cb=numa ;; socket) cb=package ;;
                      exclusive) cb=exclusive ;; core-complex) cb=l3 ;; esac
        plan "$name-cb" --nproc-per-node gpu --cpu-bind "$cb"
        plan "$name-us" --nproc-per-node gpu "--numa_binding=$mode"
        expect_eq "$label: --numa-binding $mode = --cpu-bind $cb" \
            "$(cat "$TEST_TMP/$name-cb")" "$(cat "$TEST_TMP/$name")"
        expect_eq "$label: --numa_binding $mode = --numa-binding $mode" \
            "$(cat "$TEST_TMP/$name-us")" "$(cat "$TEST_TMP/$name")"
    done
    # core-complex: no PU in two ranks, each rank inside one L3.
    name=$label-core-complex
    while read -r _ cpus; do expand "$cpus" | tr , '\n'; done <"$TEST_TMP/$name" |
        sort | uniq -d >"$TEST_TMP/dup"
    check "$label: core-complex ranks share no cpu" test ! -s "$TEST_TMP/dup"
    bad=
    while read -r _ cpus; do
        [ "$(calc --pi -N l3 $(expand "$cpus" | tr , ' ' | sed 's/[0-9][0-9]*/pu:&/g'))" = 1 ] ||
            bad="$bad $cpus"
    done <"$TEST_TMP/$name"
    expect_eq "$label: each core-complex rank's cpus are under one L3" "$bad" ""
done

# The EPYC's socket differs from amlrun's own socket: two NUMA nodes a
# package, shared by all four ranks of the package.
xml=$epyc
name=epyc-socket-share
plan "$name" --nproc-per-node gpu --numa-binding socket
expect_eq "EPYC: --numa-binding socket gives ranks 0-3 the same 48 cores" \
    "$(head -4 "$TEST_TMP/$name" | cut -d' ' -f2 | sort -u)" \
    "$(calc --po -I pu package:0 | "$TORCH_PY" -c '
import sys
v = sorted(map(int, sys.stdin.read().split(",")))
print("%d-%d" % (v[0], v[-1]) if v == list(range(v[0], v[-1] + 1)) else v)')"

# Fewer L3 domains than ranks (Lassen: 10 a node; 24 ranks, 12 a node):
# ranks take the domains in turn and split them, with a warning.
xml=$lassen
name=lassen-l3-fallback
plan "$name" --nproc-per-node 24 --numa-binding core-complex
check "fallback: the warning names the node and its 10 L3 domains" \
    grep -q "^amlrun: warning: NUMA node 0 has 10 L3 domains (cores under one last-level cache) for 12 ranks" \
    "$TEST_TMP/$name.err"
# Node 0's ranks are local ranks 0,1,4,5,... (GPUs 0 and 1 are on it): its
# 11th rank (j = 10) shares domain 0 with its first (j = 0), core by core.
l3s=$(calc -I l3 numa:0)
d0=$(calc -I core "l3:$(nth "$l3s" 0)")
node0=$(awk '$1 ~ /^0004:/' "$TEST_TMP/$name")
expect_eq "fallback: node 0's first rank gets the first core of L3 domain 0" \
    "$(expand "$(sed -n 1p <<<"$node0" | cut -d' ' -f2)")" "$(pus "core:$(nth "$d0" 0)")"
expect_eq "fallback: node 0's 11th rank gets its second core" \
    "$(expand "$(sed -n 11p <<<"$node0" | cut -d' ' -f2)")" "$(pus "core:$(nth "$d0" 1)")"

# Hostile lines: both options, a bad mode, a mode torchrun lacks.
out=$("$AMLRUN" --dry-run --topology "$lassen" --nproc-per-node 2 \
    --numa-binding node --cpu-bind exclusive true 2>&1); rc=$?
expect_eq "--numa-binding with --cpu-bind: usage error (2)" "$rc" 2
check "--numa-binding with --cpu-bind: says to give one" \
    grep -q "both choose each rank's cpus: give one of them" <<<"$out"
out=$("$AMLRUN" --dry-run --topology "$lassen" --nproc-per-node 2 \
    --numa-binding numa true 2>&1); rc=$?
expect_eq "--numa-binding numa (amlrun's name, not torchrun's): refused" "$rc" 2
check "--numa-binding numa: the error lists torchrun's modes" \
    grep -q "expected node, socket, exclusive or core-complex" <<<"$out"
