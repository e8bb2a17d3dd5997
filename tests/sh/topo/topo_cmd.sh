#!/usr/bin/env bash
# `amlrun --topo --topology FILE` against expected text in tests/golden/
# (written by hand from hwloc-ls --input FILE), an NCCL topology file
# graph file refused with a clear message, and --topo on this machine, which has no
# NVIDIA driver.
. "$(dirname "$0")/../../lib.sh"
if [ ! -x "$AMLRUN" ]; then fail "--topo: $AMLRUN not built"; exit 0; fi
unset CUDA_VISIBLE_DEVICES HWLOC_XMLFILE
dir=${AMLDIST_TOPOLOGIES:-$TOP/tests/topologies/real}

golden() { # golden FIXTURE EXPECTED
    local file=$dir/$1 out=$TEST_TMP/topo.out
    if ! "$AMLRUN" --topo --topology "$file" >"$out" 2>"$TEST_TMP/err"; then
        fail "--topo $1: exit status"; sed 's/^/# /' "$TEST_TMP/err"; return
    fi
    # The header names the file as given; compare it by its base name.
    sed -i "1s|$dir/[^ ]*/||" "$out"
    if diff -u "$TOP/tests/golden/$2" "$out" >"$TEST_TMP/diff"; then
        ok "--topo $1"
    else
        fail "--topo $1"; sed 's/^/# /' "$TEST_TMP/diff" | head -30
    fi
}
golden aws-ofi-nccl/p4d-topology.xml topo_p4d.txt
golden mpibind/coral-lassen.xml topo_coral-lassen.txt
golden mpibind/cts1-pascal.xml topo_cts1-pascal.txt
golden hwloc-tests/32em64t-2n8c2t-pci-wholeio.xml topo_32em64t-wholeio.txt

# CUDA_VISIBLE_DEVICES renumbers the matrix as CUDA would.
out=$(CUDA_VISIBLE_DEVICES=6,1 "$AMLRUN" --topo --topology \
      "$dir/aws-ofi-nccl/p4d-topology.xml" | grep -E '^GPU[01]: ')
expect_eq "--topo with CUDA_VISIBLE_DEVICES=6,1" "$out" \
"GPU0: 0000:a0:1c.0  GA100 [A100 SXM4 40GB]
GPU1: 0000:10:1d.0  GA100 [A100 SXM4 40GB]"

# HWLOC_XMLFILE is honoured like --topology.
out=$(HWLOC_XMLFILE=$dir/mpibind/cts1-pascal.xml "$AMLRUN" --topo | sed -n 1p)
expect_eq "--topo from HWLOC_XMLFILE" "$out" \
    "Topology of $dir/mpibind/cts1-pascal.xml: 2 GPUs, 1 NIC, 2 NUMA nodes, 36 cores"

# NCCL topology files are read (topo_nccl_file.sh); its graph files are not.
nccl=$dir/nccl-topo/azure/ncv4-graph.xml
if [ ! -f "$nccl" ]; then
    skip "--topo on an NCCL graph file" "$nccl missing"
elif "$AMLRUN" --topo --topology "$nccl" >/dev/null 2>"$TEST_TMP/err"; then
    fail "--topo on an NCCL graph file fails"
else
    check "--topo on an NCCL graph file says what it is" grep -q \
        "amlrun: --topo: $nccl is an NCCL graph file" "$TEST_TMP/err"
fi

out=$TEST_TMP/live
check "--topo on this machine (no NVIDIA driver) succeeds" \
    sh -c "'$AMLRUN' --topo >'$out' 2>&1"
check "--topo on this machine names it" grep -q "^Topology of this machine: " "$out"

# hwloc's plugins do not link libhwloc: they find its functions in the
# global scope, which the library's dlopen of it must keep (lib/topo/dl.c).
# A blacklist of the user's own leaves hwloc_pci and hwloc_xml_libxml in.
HWLOC_PLUGINS_BLACKLIST=hwloc_gl HWLOC_PLUGINS_VERBOSE=1 \
    "$AMLRUN" --topo >"$TEST_TMP/plugins" 2>&1
if ! grep -q "Plugin dlforeach found" "$TEST_TMP/plugins"; then
    skip "hwloc's plugins load" "no hwloc plugin installed"
else
    check "hwloc's plugins load (libhwloc in the global scope)" \
        sh -c '! grep -q "Failed to load plugin" "$0"' "$TEST_TMP/plugins"
fi
