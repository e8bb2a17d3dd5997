#!/bin/sh
# Regenerates the modified fixtures in this directory from the real ones in
# tests/topologies/real, copies of ../shared/topologies (run from the repository root).  Each keeps the
# original machine and changes one thing, for a case no real export has:
#
# p4d-numa-unknown.xml: AWS p4d.24xlarge with the PCI host bridge 0000:[a0-a0]
#   (GPUs 6 and 7, EFA rdmap160s27) moved from NUMA node 1's package up to the
#   Machine object, as hwloc shows a device whose sysfs numa_node is -1.
# 32em64t-no-rdma.xml: the Supermicro X9DRG-HF (hwloc-tests) without its
#   OpenFabrics device mlx5_0, so only network interfaces are left (ib0 next
#   to GPU 2, eth0/eth1 on NUMA node 1).
set -eu
src=${AMLDIST_TOPOLOGIES:-tests/topologies/real}
out=tests/topologies

# Cut the <object> element whose line matches $1 (with everything nested in
# it) and re-insert it just before the Machine's closing tag.
move_to_machine() {
    awk -v pat="$1" '
        depth == 0 && index($0, pat) { depth = 1; block = $0 "\n"; next }
        depth > 0 {
            block = block $0 "\n"
            if ($0 ~ /<object /) depth++
            if ($0 ~ /<\/object>/) depth--
            if ($0 ~ /<object .*\/>/) depth--
            next
        }
        /^  <\/object>/ && !done { printf "%s", block; done = 1 }
        { print }
    '
}

move_to_machine 'bridge_pci="0000:[a0-a0]"' \
    <"$src/aws-ofi-nccl/p4d-topology.xml" >"$out/p4d-numa-unknown.xml"

# Drop the OpenFabrics OS device (a one-element <object .../> or a block).
awk '
    skip > 0 { if ($0 ~ /<object /) skip++; if ($0 ~ /<\/object>/) skip--; next }
    /<object type="OSDev"/ && /osdev_type="3"/ { if ($0 !~ /\/>$/) skip = 1; next }
    { print }
' <"$src/hwloc-tests/32em64t-2n8c2t-pci-wholeio.xml" >"$out/32em64t-no-rdma.xml"
