#!/usr/bin/env bash
# Machine-readable output: --topo=json, --dry-run=json and --result-json FILE,
# on the hwloc XMLs of real machines and on this one.  Every document is
# parsed by python3's json; its values are checked against the text output
# of the same run (--topo's matrix, --report-bindings=json, which the
# library formats itself) and against hwloc-calc on the same XML.  Command
# lines with quotes, newlines and control characters come out valid JSON.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
unset HWLOC_XMLFILE CUDA_VISIBLE_DEVICES NVIDIA_VISIBLE_DEVICES
d=$TEST_TMP/json
mkdir -p "$d"
valid() { "$TORCH_PY" -c 'import json,sys; json.load(sys.stdin)' <"$1"; }
XMLS=$(ls /work/shared/topologies/aws-ofi-nccl/*.xml /work/shared/topologies/mpibind/*.xml \
    /work/shared/topologies/hwloc-tests/*.xml 2>/dev/null)
[ -n "$XMLS" ] || diag "no XMLs in /work/shared/topologies: only this machine"

# --- --topo=json against --topo's text and hwloc-calc
for xml in $XMLS; do
    n=$(basename "$xml" .xml)
    "$AMLRUN" --topology "$xml" --topo=json >"$d/$n.topo.json" 2>"$d/err"
    expect_eq "$n: --topo=json exits 0" "$?" 0
    check "$n: --topo=json is one valid JSON document" valid "$d/$n.topo.json"
    "$AMLRUN" --topology "$xml" --topo >"$d/$n.topo.txt" 2>/dev/null
    # The matrix's rows, NIC names, counts and NUMA column, from the JSON
    # in the text's shape: the two must be the same.
    expect_eq "$n: --topo=json says what --topo's matrix says" "$("$TORCH_PY" - "$d/$n.topo.json" "$d/$n.topo.txt" <<'PY'
import json, re, sys
t = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read().splitlines()
bad = []
pl = lambda n, w: "%d %s%s" % (n, w, "" if n == 1 else "s")
head = ", ".join([pl(len(t["gpus"]), "GPU"), pl(len(t["nics"]), "NIC"), pl(t["numa_nodes"], "NUMA node"), pl(t["cores"], "core")])
if head not in text[0]:
    bad.append("head: " + text[0])
rows = {l.split()[0]: l.split()[1:] for l in text if re.match(r"GPU\d+ ", l)}
for g in t["gpus"]:
    cells = rows.get("GPU%d" % g["index"], [])
    want = t["gpu_gpu"][g["index"]] + t["gpu_nic"][g["index"]]
    if cells[:len(want)] != want:
        bad.append("row %d: %s / %s" % (g["index"], cells, want))
    numa = "N/A" if g["numa"] is None else str(g["numa"])
    if cells and cells[-1] != numa:
        bad.append("numa %d: %s / %s" % (g["index"], cells[-1], numa))
    if not any(l.startswith("GPU%d: %s" % (g["index"], g["busid"])) for l in text):
        bad.append("busid %d" % g["index"])
for k, name in enumerate(t["nics"]):
    if not any(l.startswith("NIC%d: %s " % (k, name)) for l in text):
        bad.append("nic %d %s" % (k, name))
print(" ".join(bad) or "same")
PY
)" same
    # Each GPU's NUMA node (its OS index), asked of hwloc-calc.
    while read -r busid numa; do
        [ "$numa" = None ] && continue
        expect_eq "$n: GPU $busid on NUMA node $numa (hwloc-calc)" \
            "$(hwloc-calc --if xml -i "$xml" --po -I numa "pci=$busid" 2>/dev/null)" "$numa"
    done < <("$TORCH_PY" -c 'import json,sys
for g in json.load(open(sys.argv[1]))["gpus"][:4]: print(g["busid"], g["numa"])' "$d/$n.topo.json")
done

# --- --dry-run=json against --report-bindings=json and hwloc-calc
expand() {
    "$TORCH_PY" -c '
import sys
out = []
for part in sys.argv[1].split(","):
    a, _, b = part.partition("-")
    out += range(int(a), int(b or a) + 1)
print(",".join(map(str, sorted(out))))' "$1"
}
for xml in $XMLS; do
    n=$(basename "$xml" .xml)
    ngpu=$("$TORCH_PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["gpus"]))' "$d/$n.topo.json")
    [ "$ngpu" -gt 0 ] || continue
    args=(--topology "$xml" --nproc-per-node gpu --cpu-bind numa --nic-bind export)
    "$AMLRUN" "${args[@]}" --dry-run=json true >"$d/$n.dry.json" 2>"$d/err"
    expect_eq "$n: --dry-run=json exits 0" "$?" 0
    check "$n: --dry-run=json is one valid JSON document" valid "$d/$n.dry.json"
    "$AMLRUN" "${args[@]}" --dry-run --report-bindings=json true 2>/dev/null |
        grep '^{' >"$d/$n.report"
    expect_eq "$n: each rank's binding is --report-bindings=json's, its env and argv the text's" \
        "$("$TORCH_PY" - "$d/$n.dry.json" "$d/$n.report" <<'PY'
import json, sys
dr = json.load(open(sys.argv[1]))
rep = [json.loads(l) for l in open(sys.argv[2])]
bad = []
if dr["workers"] != len(rep) or len(dr["ranks"]) != len(rep):
    bad.append("count")
for r, want in zip(dr["ranks"], rep):
    b = r["binding"]
    for k in ("gpu", "gpu_busid", "cpus", "cores", "numa", "numa_guessed", "nic", "nic_port", "nic_distance"):
        if b.get(k) != want.get(k):
            bad.append("rank %d %s: %r / %r" % (r["rank"], k, b.get(k), want.get(k)))
    if r["local_rank"] != want["local_rank"] or r["rank"] != want["rank"]:
        bad.append("ids")
    if r["env"].get("AMLDIST_GPU") != b["gpu_busid"] or r["env"].get("AMLDIST_CPUS") != b["cpus"]:
        bad.append("env %d" % r["rank"])
    if r["env"].get("RANK") != str(r["rank"]) or r["argv"][1:] != []:
        bad.append("rank env/argv %d" % r["rank"])
print(" ".join(bad) or "same")
PY
)" same
    # --cpu-bind numa: a rank's cpus are its GPU's NUMA node's PUs.
    while read -r busid cpus; do
        numa=$(hwloc-calc --if xml -i "$xml" --po -I numa "pci=$busid" 2>/dev/null)
        [ -n "$numa" ] || continue
        expect_eq "$n: GPU $busid's rank gets NUMA node $numa's cpus (hwloc-calc)" \
            "$(expand "$cpus")" \
            "$(hwloc-calc --if xml -i "$xml" --pi --po -I pu "numa:$numa" | tr , '\n' | sort -n | paste -sd,)"
    done < <("$TORCH_PY" -c 'import json,sys
for r in json.load(open(sys.argv[1]))["ranks"][:3]:
    b = r["binding"]
    if b["cpus"] and not b["numa_guessed"]: print(b["gpu_busid"], b["cpus"])' "$d/$n.dry.json")
done

# --- this machine
"$AMLRUN" --topo=json >"$d/here.topo.json" 2>"$d/err"
expect_eq "this machine: --topo=json exits 0" "$?" 0
check "this machine: --topo=json is valid JSON" valid "$d/here.topo.json"
"$AMLRUN" --nproc-per-node 2 --report-bindings --dry-run=json true >"$d/here.dry.json" 2>"$d/err"
expect_eq "this machine: --dry-run=json exits 0" "$?" 0
check "this machine: --dry-run=json is valid JSON (--report-bindings adds no line)" valid "$d/here.dry.json"

# --- quotes, newlines, control characters, non-ASCII bytes
weird=$'a"b\n\\c\t\x01\x7f\xc3\xa9 \''
WEIRD_VAR=$weird "$AMLRUN" -v --nproc-per-node 1 --dry-run=json true "$weird" x \
    >"$d/weird.json" 2>"$d/err"
check "--dry-run=json with quotes and control characters is valid JSON" valid "$d/weird.json"
expect_eq "the argument and the variable come back byte for byte" "$(WEIRD="$weird" "$TORCH_PY" -c '
import json, os, sys
d = json.load(open(sys.argv[1]))
w = os.environ["WEIRD"].encode("utf-8", "surrogateescape")
r = d["ranks"][0]
back = lambda s: s.encode("latin-1")
print(back(r["argv"][1]) == w, r["argv"][2], back(r["env"]["WEIRD_VAR"]) == w)' "$d/weird.json")" "True x True"
"$AMLRUN" -q --nproc-per-node 1 --result-json "$d/weird.result" true "$weird" >/dev/null 2>&1
check "--result-json of such a command is valid JSON" valid "$d/weird.result"

# --- --result-json: a job whose rank 1 fails, and one that succeeds
cat >"$d/fail1.py" <<'PY'
import os, sys, time
if os.environ["RANK"] == "1":
    time.sleep(0.2)
    sys.exit(3)
time.sleep(60)
PY
"$AMLRUN" -q --nproc-per-node 3 --master-port "$(free_port)" \
    --result-json "$d/fail.json" "$TORCH_PY" "$d/fail1.py" >/dev/null 2>"$d/fail.err"
expect_eq "failing job: amlrun exits 3" "$?" 3
check "failing job: --result-json is valid JSON" valid "$d/fail.json"
expect_eq "failing job: rank 1 is the first failure, the others terminated, times ordered" \
    "$("$TORCH_PY" - "$d/fail.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
f = r["first_failure"]
out = [r["exit_status"], f["rank"], f["exit_code"], f["status"]]
out += [(k["rank"], k["status"], k["exit_code"], k["signal"]) for k in r["ranks"]]
times = all(r["start_time"] <= k["start_time"] <= k["end_time"] <= r["end_time"]
            and abs(k["end_time"] - k["start_time"] - k["duration_s"]) < 0.002
            for k in r["ranks"])
out.append(times and f["duration_s"] >= 0.2)
print(out)
PY
)" "[3, 1, 3, 'failed', (0, 'terminated', 143, 'SIGTERM'), (1, 'failed', 3, None), (2, 'terminated', 143, 'SIGTERM'), True]"
[ -s "$d/fail.json" ] && "$TORCH_PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["first_failure"]["pid"])' "$d/fail.json" >"$d/pid" 2>/dev/null
check "failing job: the first failure's pid is the one the text names" \
    grep -q "rank 1 (local 1, pid $(cat "$d/pid" 2>/dev/null)," "$d/fail.err"
"$AMLRUN" -q --nproc-per-node 2 --result-json "$d/ok.json" true >/dev/null 2>&1
expect_eq "succeeding job: amlrun exits 0" "$?" 0
expect_eq "succeeding job: no failure, every rank succeeded with times" "$("$TORCH_PY" -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(r["exit_status"], r["first_failure"], [(k["status"], k["exit_code"], k["start_time"] <= k["end_time"]) for k in r["ranks"]])' "$d/ok.json")" \
    "0 None [('succeeded', 0, True), ('succeeded', 0, True)]"
# A path that cannot be written is refused at start (2), before any worker
# runs, not found out when the job ends; an existing file is not touched
# until the result is written.
"$AMLRUN" -q --nproc-per-node 1 --result-json "$d/no/such/dir/r.json" \
    sh -c "touch '$d/ran'" >/dev/null 2>"$d/err"
expect_eq "an unwritable --result-json is refused at start, no worker run" \
    "$?:$(grep -c 'result-json .*cannot write it' "$d/err"):$([ -e "$d/ran" ] && echo ran)" "2:1:"
echo old >"$d/keep.json"
"$AMLRUN" -q --nproc-per-node 1 --result-json "$d/keep.json" \
    sh -c "cat '$d/keep.json' >'$d/seen'" >/dev/null 2>&1
expect_eq "the check leaves an earlier result as it was until the end" \
    "$(cat "$d/seen"):$("$TORCH_PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["exit_status"])' "$d/keep.json")" "old:0"

# --- head-node mode and per-process mode
# Head node: the command it would exec, one string per word: the same words
# as the text dry run's shell line.
"$AMLRUN" --hosts a:2,b:2 --dry-run ./train --lr 'x y' >"$d/head.txt"
"$AMLRUN" --hosts a:2,b:2 --dry-run=json ./train --lr 'x y' >"$d/head.json"
expect_eq "head node --dry-run=json: the text's words, hosts and slots" \
    "$("$TORCH_PY" -c 'import json, shlex, sys
j = json.load(open(sys.argv[1])); t = shlex.split(open(sys.argv[2]).read())
print(j["mode"], j["launcher"], j["command"] == t, [(h["name"], h["slots"]) for h in j["hosts"]], j["nproc_per_node"], j["command"][-3:])' \
        "$d/head.json" "$d/head.txt")" \
    "head mpirun True [('a', 2), ('b', 2)] 2 ['./train', '--lr', 'x y']"
# In place under mpirun: each process prints its own rank's document.
$MPIRUN -np 2 "$AMLRUN" --dry-run=json true >"$d/inplace.json" 2>/dev/null
expect_eq "mpirun -np 2 amlrun --dry-run=json: one document per rank, ranks 0 and 1" \
    "$("$TORCH_PY" -c 'import json, sys
docs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(sorted(r["rank"] for d in docs for r in d["ranks"]), sorted({r["env"]["WORLD_SIZE"] for d in docs for r in d["ranks"]}))' \
        "$d/inplace.json")" "[0, 1] ['2']"

# --- values
for opt in --dry-run=xml --topo=yaml; do
    "$AMLRUN" "$opt" true >/dev/null 2>"$d/err"
    expect_eq "$opt: a usage error (2)" "$?" 2
done
