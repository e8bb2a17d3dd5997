#!/usr/bin/env bash
# NCCL topology files (NCCL_TOPO_FILE): every example Azure and AWS ship is
# read by `amlrun --topo --topology FILE`, with the GPUs and NUMA nodes the
# file itself gives (read here with python3's xml.etree, not amlrun's code);
# --dry-run --report-bindings binds each rank to its GPU's NUMA node's CPUs
# per the file; NCCL_TOPO_FILE places the GPUs an hwloc topology leaves
# without a NUMA node; malformed files and unknown bus ids are named; -v,
# --topo and --report-bindings say where the locality came from.
. "$(dirname "$0")/../../lib.sh"
if [ ! -x "$AMLRUN" ]; then fail "nccl file: $AMLRUN not built"; exit 0; fi
if ! have python3; then skip "nccl file" "no python3"; exit 0; fi
unset CUDA_VISIBLE_DEVICES HWLOC_XMLFILE NCCL_TOPO_FILE
dir=${AMLDIST_NCCL_TOPOS:-$TOP/tests/topologies/real/nccl-topo}

# expect FILE: "busid numaid cpulist" per GPU of the file, in PCI order, or
# "nocpus" when a <cpu> has no affinity (the file cannot stand for a machine)
expect() {
    "$TORCH_PY" - "$1" <<'PY'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
def cpulist(mask):
    v = int(mask.replace(",", ""), 16)
    bits = [i for i in range(v.bit_length()) if v >> i & 1]
    out, i = [], 0
    while i < len(bits):
        j = i
        while j + 1 < len(bits) and bits[j + 1] == bits[j] + 1:
            j += 1
        out.append(str(bits[i]) if i == j else "%d-%d" % (bits[i], bits[j]))
        i = j + 1
    return ",".join(out)
cpus = root.findall("cpu")
if any(not c.get("affinity") for c in cpus):
    print("nocpus")
    sys.exit()
gpus = []
for c in cpus:
    for p in c.iter("pci"):
        if p.get("class", "").lower().startswith("0x03"):
            gpus.append((p.get("busid").lower(), c.get("numaid"),
                         cpulist(c.get("affinity"))))
def key(g):
    d, b, df = g[0].split(":")
    dev, fn = df.split(".")
    return (int(d, 16), int(b, 16), int(dev, 16), int(fn, 16))
for g in sorted(gpus, key=key):
    print(*g)
PY
}

for file in "$dir"/*/*-topo.xml; do
    name=${file#"$dir"/}
    want=$(expect "$file") || { fail "$name: python3 cannot read it"; continue; }
    out=$TEST_TMP/topo.out
    if [ "$want" = nocpus ]; then
        # AWS g5: numaids over PCI switches only, for NCCL to place the live
        # machine's devices.
        if "$AMLRUN" --topo --topology "$file" >"$out" 2>&1; then
            fail "$name: a file without CPU affinities cannot be a machine"
        else
            check "$name: says it gives no CPUs" grep -q \
                "gives no CPUs (affinity) for NUMA node" "$out"
        fi
        continue
    fi
    if ! "$AMLRUN" --topo --topology "$file" >"$out" 2>&1; then
        fail "$name: --topo"; sed 's/^/# /' "$out"; continue
    fi
    check "$name: --topo says where locality came from" grep -q \
        "^NUMA locality of GPUs and NICs from the NCCL topology file $file\$" "$out"
    # GPUi: BUSID lines, and the NUMA column of the matrix.
    got=$(awk '/^GPU[0-9]+: / {bus[$1] = $2}
               /^GPU[0-9]+ / {numa[$1 ":"] = $NF; cpus[$1 ":"] = $(NF-1)}
               END {for (i = 0; ("GPU" i ":") in bus; i++)
                        print bus["GPU" i ":"], numa["GPU" i ":"], cpus["GPU" i ":"]}' "$out")
    expect_eq "$name: GPUs, their NUMA nodes and CPUs" "$got" "$want"
    n=$(printf '%s\n' "$want" | grep -c .)
    [ "$n" -gt 0 ] || continue
    # Each rank: its GPU's node's CPUs (--cpu-bind numa), as the file says.
    if ! "$AMLRUN" --dry-run --report-bindings --cpu-bind numa \
        --nproc-per-node "$n" --topology "$file" true >"$out" 2>&1; then
        fail "$name: --dry-run"; sed 's/^/# /' "$out"; continue
    fi
    check "$name: --report-bindings says where locality came from" grep -q \
        "^amlrun: NUMA locality of GPUs and NICs from the NCCL topology file $file " "$out"
    got=$(sed -n 's/^amlrun: rank [0-9]* (local [0-9]*): gpu [0-9]* \([^,]*\), cpus \([^ ]*\) .*, numa \([0-9]*\),.*/\1 \3 \2/p' "$out")
    expect_eq "$name: each rank bound to its GPU's NUMA node" "$got" "$want"
done

# An NCCL graph file, a malformed file, a file without <cpu> numaid.
bad=$TEST_TMP/bad.xml
printf '<system version="1">\n  <cpu numaid="0" affinity="ff">\n    <pci busid="0000:01:00.0"\n</system>\n' >"$bad"
check "malformed: fails" sh -c "! '$AMLRUN' --topo --topology '$bad' >'$TEST_TMP/err' 2>&1"
check "malformed: says so, with the line" grep -q \
    "NCCL topology file $bad: not well-formed XML (line [0-9]*" "$TEST_TMP/err"
printf '<system version="1">\n  <cpu affinity="ff"/>\n</system>\n' >"$bad"
check "no numaid: fails" sh -c "! '$AMLRUN' --topo --topology '$bad' >'$TEST_TMP/err' 2>&1"
check "no numaid: names the line" grep -q \
    "NCCL topology file $bad, line 2: <cpu> without a numaid" "$TEST_TMP/err"
printf '<system version="1">\n  <cpu numaid="0" affinity="0f,ff"/>\n</system>\n' >"$bad"
check "bad affinity: fails" sh -c "! '$AMLRUN' --topo --topology '$bad' >'$TEST_TMP/err' 2>&1"
check "bad affinity: names it" grep -q \
    'bad affinity (not a Linux cpumask) "0f,ff"' "$TEST_TMP/err"

# NCCL_TOPO_FILE on an hwloc topology whose last two GPUs (and a NIC) have
# no NUMA node: the file places them, and says so.
hw=$TOP/tests/topologies/p4d-numa-unknown.xml
p4d=$dir/aws/p4d-24xl-topo.xml
NCCL_TOPO_FILE=$p4d "$AMLRUN" --topo --topology "$hw" >"$out" 2>&1
check "NCCL_TOPO_FILE: --topo says which devices it placed" grep -q \
    "^NUMA locality of GPUs and NICs from NCCL_TOPO_FILE=$p4d for 2 GPUs and 1 NIC (hwloc gives them none), else from hwloc\$" "$out"
got=$(awk '/^GPU[67] / {print $1, $NF}' "$out" | tr '\n' ' ')
expect_eq "NCCL_TOPO_FILE: GPUs 6 and 7 on the file's NUMA node" "$got" "GPU6 1 GPU7 1 "
check "NCCL_TOPO_FILE: no notice of GPUs without a node" \
    sh -c "! grep -q 'has no known NUMA node' '$out'"
NCCL_TOPO_FILE=$p4d "$AMLRUN" --dry-run --report-bindings --cpu-bind numa \
    --nproc-per-node 8 --topology "$hw" true >"$out" 2>&1
got=$(sed -n 's/^amlrun: rank \([67]\) .*, numa \([0-9]*\),.*/\1 \2/p' "$out" | tr '\n' ' ')
expect_eq "NCCL_TOPO_FILE: ranks 6 and 7 bound on NUMA node 1" "$got" "6 1 7 1 "

# A file whose bus ids are not this machine's: notices, hwloc alone.
NCCL_TOPO_FILE=$dir/azure/ndv4-topo.xml "$AMLRUN" --topo --topology "$hw" >"$out" 2>&1
check "unknown bus ids: locality from hwloc" grep -q \
    "^NUMA locality of GPUs and NICs from hwloc\$" "$out"
check "unknown bus ids: the GPUs it cannot place are named" grep -q \
    "GPU 0000:a0:1c.0 has no NUMA node from hwloc and is not in NCCL_TOPO_FILE=" "$out"
check "unknown bus ids: the file's strangers are named" grep -q \
    "NCCL_TOPO_FILE=$dir/azure/ndv4-topo.xml lists 16 GPUs or NICs this machine does not have" "$out"
# A malformed NCCL_TOPO_FILE is a notice, not a failure of the machine.
printf '<system' >"$bad"
check "malformed NCCL_TOPO_FILE: --topo still succeeds" \
    sh -c "NCCL_TOPO_FILE='$bad' '$AMLRUN' --topo --topology '$hw' >'$out' 2>&1"
check "malformed NCCL_TOPO_FILE: noticed" grep -q \
    "NCCL topology file $bad: not well-formed XML.*; locality from hwloc alone" "$out"

# A file that names only the PCI switch above GPUs (as AWS g5's does): the
# GPUs under it get its NUMA node.  The fixture's last two GPUs are put
# under a switch 0000:a0:01.0 here.
sw=$TEST_TMP/switch.xml
"$TORCH_PY" - "$hw" "$sw" <<'PY'
import sys, xml.etree.ElementTree as ET
tree = ET.parse(sys.argv[1])
for parent in tree.iter("object"):
    kids = [k for k in parent if k.get("pci_busid") in ("0000:a0:1c.0", "0000:a0:1d.0")]
    if not kids:
        continue
    at = list(parent).index(kids[0])
    br = ET.Element("object", {"type": "Bridge", "gp_index": "9999",
        "bridge_type": "1-1", "depth": "1", "bridge_pci": "0000:[a0-a0]",
        "pci_busid": "0000:a0:01.0", "pci_type": "0604 [0000:0000] [0000:0000] 00"})
    for k in kids:
        parent.remove(k)
        br.append(k)
    parent.insert(at, br)
    break
tree.write(sys.argv[2])
PY
printf '<system version="1">\n  <cpu numaid="1">\n    <pci busid="0000:a0:01.0"/>\n  </cpu>\n</system>\n' >"$bad"
NCCL_TOPO_FILE=$bad "$AMLRUN" --topo --topology "$sw" >"$out" 2>&1
got=$(awk '/^GPU[67] / {print $1, $NF}' "$out" | tr '\n' ' ')
expect_eq "switch only: GPUs 6 and 7 on its NUMA node" "$got" "GPU6 1 GPU7 1 "
check "switch only: says it placed them" grep -q \
    "^NUMA locality of GPUs and NICs from NCCL_TOPO_FILE=$bad for 2 GPUs" "$out"

# -v says it too.
"$AMLRUN" -v --dry-run --nproc-per-node 2 --topology "$p4d" true >"$out" 2>&1
check "-v says where locality came from" grep -q \
    "^amlrun: NUMA locality of GPUs and NICs from the NCCL topology file $p4d (topology: NCCL topology file $p4d)\$" "$out"
