#!/usr/bin/env bash
# amlrun --output: the plan drawn by lstopo.  On real XMLs with GPUs and
# NICs, and on this machine: the SVG parses, every "rank N" label is there,
# and the PUs drawn in a rank's colour are exactly the cpus of its plan
# (--report-bindings=json of the same --dry-run; a cpu two ranks share has
# the first one's colour); each rank's GPU and NIC carry its label.  PNG
# and PDF by their magic bytes; an unwritable path, an unknown extension,
# --output alone and a missing lstopo are clear errors.
. "$(dirname "$0")/../../lib.sh"
if [ ! -x "$AMLRUN" ]; then fail "--output: $AMLRUN not built"; exit 0; fi
if ! command -v lstopo >/dev/null; then
    skip "--output" "lstopo not installed (Debian package hwloc)"; exit 0
fi
unset CUDA_VISIBLE_DEVICES HWLOC_XMLFILE
dir=${AMLDIST_TOPOLOGIES:-$TOP/tests/topologies/real}

# check NAME SVG JSON: the SVG against the plan's JSON lines.
check() {
    if "$TORCH_PY" - "$2" "$3" >"$TEST_TMP/check" 2>&1 <<'EOF'; then
import json, re, sys
import xml.etree.ElementTree as ET

svg, plan = sys.argv[1], sys.argv[2]
root = ET.parse(svg).getroot()
ns = '{http://www.w3.org/2000/svg}'
ranks = [json.loads(l) for l in open(plan) if l.startswith('{')]
texts = {}
for t in root.iter(ns + 'text'):
    texts[t.get('id', '')] = t.text or ''
alltext = list(texts.values())
bad = []
def cpus(s):
    out = set()
    for part in filter(None, s.split(',')):
        a, _, b = part.partition('-')
        out.update(range(int(a), int(b or a) + 1))
    return out
colour = {}
for r in ranks:
    n = r['local_rank']
    label = 'rank %d' % n
    if label not in alltext:
        bad.append('no label "%s"' % label)
    leg = [t for t in alltext if t.startswith(label + ' (#')]
    if len(leg) != 1:
        bad.append('no legend line for %s' % label)
        continue
    colour[n] = re.match(r'rank \d+ \((#[0-9a-f]{6})\)', leg[0]).group(1)
    if r.get('gpu_busid') and r['gpu_busid'] not in leg[0]:
        bad.append('%s: legend lacks GPU %s' % (label, r['gpu_busid']))
    if r.get('nic') and r['nic'] not in leg[0]:
        bad.append('%s: legend lacks NIC %s' % (label, r['nic']))
    # One Misc "rank N" on its cores, one on its GPU, one on its NIC.
    want = bool(r.get('cpus')) + bool(r.get('gpu_busid')) + bool(r.get('nic'))
    got = sum(1 for k, v in texts.items()
              if k.startswith('Misc_') and v == label)
    if got != want:
        bad.append('%s: %d labels, want %d' % (label, got, want))
# The PUs as drawn: rect PU_<L>_rect, its OS index in text "P#<os>".
drawn = {}
for rect in root.iter(ns + 'rect'):
    m = re.match(r'PU_(\d+)_rect$', rect.get('id', ''))
    if not m:
        continue
    os_idx = None
    for k, v in texts.items():
        if k.startswith('PU_%s_text' % m.group(1)) and v.startswith('P#'):
            os_idx = int(v[2:])
    fill = rect.get('fill', '')
    rgb = re.match(r'rgb\((\d+),(\d+),(\d+)\)', fill)
    drawn[os_idx] = '#%02x%02x%02x' % tuple(map(int, rgb.groups())) if rgb else fill
if not drawn:
    bad.append('no PU drawn')
owner = {}
for r in ranks:
    for c in cpus(r.get('cpus', '')):
        owner.setdefault(c, r['local_rank'])
# Past the palette's colours they repeat: one colour, all its ranks.
for n, col in colour.items():
    same = {k for k, c in colour.items() if c == col}
    got = {pu for pu, f in drawn.items() if f == col}
    want = {c for c, o in owner.items() if o in same}
    if got != want:
        bad.append('rank %d: PUs in %s: %s, plan: %s'
                   % (n, col, sorted(got), sorted(want)))
print('\n'.join(bad))
sys.exit(1 if bad else 0)
EOF
        ok "$1"
    else
        fail "$1"; sed 's/^/# /' "$TEST_TMP/check" | head -20
    fi
}

# draw NAME ARGS...: --dry-run --output, then check against its plan.
draw() {
    local name=$1; shift
    local svg=$TEST_TMP/$RANDOM.svg plan=$TEST_TMP/plan.json
    if ! "$AMLRUN" --dry-run --report-bindings=json --output "$svg" "$@" \
         true >"$plan" 2>"$TEST_TMP/err"; then
        fail "$name: exit status"; sed 's/^/# /' "$TEST_TMP/err" | head; return
    fi
    check "$name" "$svg" "$plan"
}

draw "p4d: 8 ranks, GPUs and NICs" --nproc-per-node 8 \
    --topology "$dir/aws-ofi-nccl/p4d-topology.xml"
draw "p4d: 4 ranks, --cpu-bind numa" --nproc-per-node 4 --cpu-bind numa \
    --topology "$dir/aws-ofi-nccl/p4d-topology.xml"
draw "Lassen: 4 GPUs" --nproc-per-node 4 \
    --topology "$dir/mpibind/coral-lassen.xml"
draw "DGX-2: 16 GPUs" --nproc-per-node 16 \
    --topology "$dir/hwloc-tests/nvidiaDGX2.xml"
draw "DGX-2: 20 ranks, colours repeating" --nproc-per-node 20 \
    --topology "$dir/hwloc-tests/nvidiaDGX2.xml"
draw "cts1-pascal" --nproc-per-node 2 --topology "$dir/mpibind/cts1-pascal.xml"
draw "this machine" --nproc-per-node 2

# --topo --output: one rank per GPU, the same drawing as the dry run's.
svg=$TEST_TMP/topo.svg
if "$AMLRUN" --topo --topology "$dir/aws-ofi-nccl/p4d-topology.xml" \
       --output "$svg" >/dev/null 2>"$TEST_TMP/err" &&
   "$AMLRUN" --dry-run --report-bindings=json --nproc-per-node 8 \
       --topology "$dir/aws-ofi-nccl/p4d-topology.xml" true \
       >"$TEST_TMP/topo.json" 2>/dev/null; then
    check "--topo --output: one rank per GPU" "$svg" "$TEST_TMP/topo.json"
else
    fail "--topo --output: exit status"; sed 's/^/# /' "$TEST_TMP/err"
fi

# Per-process mode (under mpirun): local rank 0 draws the node's plan, the
# one a per-node dry run of as many ranks makes.
svg=$TEST_TMP/inplace.svg
if env OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=4 \
       OMPI_COMM_WORLD_LOCAL_RANK=0 OMPI_COMM_WORLD_LOCAL_SIZE=4 \
       "$AMLRUN" --dry-run --topology "$dir/aws-ofi-nccl/p4d-topology.xml" \
       --output "$svg" true >/dev/null 2>"$TEST_TMP/err" &&
   "$AMLRUN" --dry-run --report-bindings=json --nproc-per-node 4 \
       --topology "$dir/aws-ofi-nccl/p4d-topology.xml" true \
       >"$TEST_TMP/inplace.json" 2>/dev/null; then
    check "per-process --dry-run --output: the node's plan" "$svg" \
        "$TEST_TMP/inplace.json"
else
    fail "per-process --dry-run --output: exit status"
    sed 's/^/# /' "$TEST_TMP/err"
fi

# magic FORMAT BYTES: the file starts as a file of that format does.
magic() {
    local f=$TEST_TMP/pic.$1
    if "$AMLRUN" --topo --topology "$dir/mpibind/coral-lassen.xml" \
           --output "$f" >/dev/null 2>"$TEST_TMP/err" &&
       [ "$(head -c ${#2} "$f")" = "$2" ]; then
        ok "--output .$1: $2"
    else
        fail "--output .$1"; sed 's/^/# /' "$TEST_TMP/err"
    fi
}
magic png "$(printf '\211PNG')"
magic pdf "%PDF-"
magic svg "<?xml"

# refused NAME WANT ARGS...: exit status 2 or 125, a message with WANT.
refused() {
    local name=$1 want=$2; shift 2
    local err rc=0
    err=$("$AMLRUN" "$@" 2>&1 >/dev/null) || rc=$?
    if [ "$rc" -ne 0 ] && printf '%s' "$err" | grep -qF -- "$want"; then
        ok "$name"
    else
        fail "$name (status $rc)"; printf '%s\n' "$err" | sed 's/^/# /'
    fi
}
lassen=$dir/mpibind/coral-lassen.xml
refused "--output in a missing directory" "No such file or directory" \
    --topo --topology "$lassen" --output "$TEST_TMP/none/x.svg"
refused "--output .gif: unknown format" "unknown format" \
    --topo --topology "$lassen" --output "$TEST_TMP/x.gif"
refused "--output without --topo or --dry-run" "--topo or --dry-run" \
    --output "$TEST_TMP/x.svg" true
err=$(PATH=/nonexistent "$AMLRUN" --topo --topology "$lassen" \
      --output "$TEST_TMP/y.svg" 2>&1 >/dev/null)
case $err in
*"lstopo not found"*"package hwloc"*) ok "--output without lstopo" ;;
*) fail "--output without lstopo"; printf '%s\n' "$err" | sed 's/^/# /' ;;
esac
if [ ! -e "$TEST_TMP/x.gif" ] && [ ! -e "$TEST_TMP/y.svg" ]; then
    ok "--output: nothing left behind by a failure"
else
    fail "--output: a failure left a file"
fi
leftover=$(find "${TMPDIR:-/tmp}" -maxdepth 1 -name 'amlrun-picture-*' \
           -newer "$TEST_TMP" 2>/dev/null)
expect_eq "--output: the temporary XML removed" "$leftover" ""
