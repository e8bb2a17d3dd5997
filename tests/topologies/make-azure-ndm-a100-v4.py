#!/usr/bin/python3
"""Writes tests/topologies/azure-ndm-a100-v4.xml, an hwloc 2 XML topology of an
Azure Standard_ND96amsr_A100_v4 (NDm A100 v4) VM, built from published facts
rather than exported from a machine (no such export is public).  Run from the
repository root; tests/topologies/README.md lists the facts and their sources.

    2 packages, AMD EPYC 7V12 (Zen 2 "Rome"), 48 cores each given to the VM,
      no SMT: 96 vCPUs = 96 cores.
    4 NUMA nodes of 24 cores (the VM's NUMA view, two per package), cpus
      0-23, 24-47, 48-71, 72-95, 475 GiB each (1900 GiB in all).
    Zen 2 caches: an L3 of 16 MiB for each core complex (CCX) of 4 cores,
      L2 512 KiB, L1d and L1i 32 KiB per core: 6 CCX per NUMA node.
    8 A100-SXM4-80GB (10de:20b5) and 8 ConnectX-6 InfiniBand virtual
      functions (15b3:101c, mlx5_ib0..7, port 1 active), each alone on its
      own PCI domain as Hyper-V shows them: GPUs 0001-0002 and NICs 0101-0102
      on NUMA node 1, 0003-0004 / 0103-0104 on node 0, 000b-000c / 0105-0106
      on node 3, 000d-000e / 0107-0108 on node 2.
"""
import sys

NUMA_CORES = 24
CCX_CORES = 4
NODES = 4
NODES_PER_PACKAGE = 2
NODE_MEMORY = 475 * 1024 ** 3
# NUMA node -> (GPU domains, NIC domains), in the VM's PCI numbering.
DEVICES = {0: ((0x0003, 0x0004), (0x0103, 0x0104)),
           1: ((0x0001, 0x0002), (0x0101, 0x0102)),
           2: ((0x000d, 0x000e), (0x0107, 0x0108)),
           3: ((0x000b, 0x000c), (0x0105, 0x0106))}


def bitmap(bits):
    """hwloc's bitmap text: 32-bit words, the most significant first."""
    value = 0
    for b in bits:
        value |= 1 << b
    words = []
    while True:
        words.append("0x%08x" % (value & 0xffffffff))
        value >>= 32
        if value == 0:
            break
    return ",".join(reversed(words))


class Writer:
    def __init__(self):
        self.lines = []
        self.gp = 0

    def gp_index(self):
        self.gp += 1
        return self.gp

    def sets(self, cpus, nodes):
        return ('cpuset="%s" complete_cpuset="%s" nodeset="%s" '
                'complete_nodeset="%s"' % (bitmap(cpus), bitmap(cpus),
                                           bitmap(nodes), bitmap(nodes)))

    def open(self, depth, text):
        self.lines.append("  " * depth + "<object " + text + ">")

    def close(self, depth):
        self.lines.append("  " * depth + "</object>")

    def leaf(self, depth, text):
        self.lines.append("  " * depth + "<object " + text + "/>")

    def info(self, depth, name, value):
        self.lines.append("  " * depth + '<info name="%s" value="%s"/>'
                          % (name, value))


def cache(w, depth, kind, level, size, ctype, cpus, node):
    w.open(depth, 'type="%s" %s gp_index="%d" cache_size="%d" depth="%d" '
           'cache_linesize="64" cache_associativity="0" cache_type="%d"'
           % (kind, w.sets(cpus, [node]), w.gp_index(), size, level, ctype))


def pci(w, depth, domain, cls, ids, name, vendor, osdev, port_state):
    w.open(depth, 'type="Bridge" gp_index="%d" bridge_type="0-1" depth="0" '
           'bridge_pci="%04x:[00-00]"' % (w.gp_index(), domain))
    w.open(depth + 1, 'type="PCIDev" gp_index="%d" pci_busid="%04x:00:00.0" '
           'pci_type="%s %s 00" pci_link_speed="31.507692"'
           % (w.gp_index(), domain, cls, ids))
    w.info(depth + 2, "PCIVendor", vendor)
    w.info(depth + 2, "PCIDevice", name)
    if osdev is not None:
        w.open(depth + 2, 'type="OSDev" gp_index="%d" name="%s" '
               'subtype="OpenFabrics" osdev_type="3"' % (w.gp_index(), osdev))
        w.info(depth + 3, "Port1State", port_state)
        w.info(depth + 3, "Port1LID", "0x0")
        w.close(depth + 2)
    w.close(depth + 1)
    w.close(depth)


def node_group(w, depth, node):
    first = node * NUMA_CORES
    cpus = range(first, first + NUMA_CORES)
    w.open(depth, 'type="Group" %s gp_index="%d" kind="1000" subkind="0"'
           % (w.sets(cpus, [node]), w.gp_index()))
    w.leaf(depth + 1, 'type="NUMANode" os_index="%d" %s gp_index="%d" '
           'local_memory="%d"' % (node, w.sets(cpus, [node]), w.gp_index(),
                                  NODE_MEMORY))
    for ccx in range(first, first + NUMA_CORES, CCX_CORES):
        ccpus = range(ccx, ccx + CCX_CORES)
        cache(w, depth + 1, "L3Cache", 3, 16 << 20, 0, ccpus, node)
        for core in ccpus:
            cache(w, depth + 2, "L2Cache", 2, 512 << 10, 0, [core], node)
            cache(w, depth + 3, "L1Cache", 1, 32 << 10, 1, [core], node)
            cache(w, depth + 4, "L1iCache", 1, 32 << 10, 2, [core], node)
            w.open(depth + 5, 'type="Core" os_index="%d" %s gp_index="%d"'
                   % (core, w.sets([core], [node]), w.gp_index()))
            w.leaf(depth + 6, 'type="PU" os_index="%d" %s gp_index="%d"'
                   % (core, w.sets([core], [node]), w.gp_index()))
            for d in range(5, 1, -1):
                w.close(depth + d)
        w.close(depth + 1)
    gpus, nics = DEVICES[node]
    for dom in gpus:
        pci(w, depth + 1, dom, "0302", "[10de:20b5] [10de:1533]",
            "GA100 [A100 SXM4 80GB]", "NVIDIA Corporation", None, None)
    for i, dom in enumerate(nics):
        pci(w, depth + 1, dom, "0207", "[15b3:101c] [15b3:0007]",
            "MT28908 Family [ConnectX-6 Virtual Function]",
            "Mellanox Technologies", "mlx5_ib%d" % (dom - 0x0101), "4")
    w.close(depth)


def main():
    w = Writer()
    allcpus = range(NODES * NUMA_CORES)
    allnodes = range(NODES)
    w.lines.append('<?xml version="1.0" encoding="UTF-8"?>')
    w.lines.append('<!DOCTYPE topology SYSTEM "hwloc2.dtd">')
    w.lines.append('<topology version="2.0">')
    w.open(1, 'type="Machine" os_index="0" %s allowed_cpuset="%s" '
           'allowed_nodeset="%s" gp_index="%d"'
           % (w.sets(allcpus, allnodes), bitmap(allcpus), bitmap(allnodes),
              w.gp_index()))
    w.info(2, "DMIProductName", "Virtual Machine")
    w.info(2, "DMISysVendor", "Microsoft Corporation")
    w.info(2, "Backend", "Linux")
    w.info(2, "OSName", "Linux")
    w.info(2, "Architecture", "x86_64")
    per_pkg = NODES_PER_PACKAGE * NUMA_CORES
    for pkg in range(NODES // NODES_PER_PACKAGE):
        nodes = range(pkg * NODES_PER_PACKAGE, (pkg + 1) * NODES_PER_PACKAGE)
        w.open(2, 'type="Package" os_index="%d" %s gp_index="%d"'
               % (pkg, w.sets(range(pkg * per_pkg, (pkg + 1) * per_pkg),
                              nodes), w.gp_index()))
        w.info(3, "CPUVendor", "AuthenticAMD")
        w.info(3, "CPUFamilyNumber", "23")
        w.info(3, "CPUModelNumber", "49")
        w.info(3, "CPUModel", "AMD EPYC 7V12 64-Core Processor")
        for node in nodes:
            node_group(w, 3, node)
        w.close(2)
    w.close(1)
    w.lines.append("</topology>")
    out = sys.argv[1] if len(sys.argv) > 1 else \
        "tests/topologies/azure-ndm-a100-v4.xml"
    with open(out, "w") as f:
        f.write("\n".join(w.lines) + "\n")


main()
