#!/usr/bin/env bash
# amlrun's command line: help, usage errors (status 2), commands that cannot
# run (126/127, reported once), Python wrapping, the legacy --local_rank,
# --dry-run, --nproc-per-node gpu/auto.
. "$(dirname "$0")/../lib.sh"
. "$TOP/tests/amlrun/common.sh"
d=$TEST_TMP/cli
mkdir -p "$d"

"$AMLRUN" --help >"$d/help"
expect_eq "--help exits 0" "$?" 0
check "--help shows the usage" grep -q '^usage: amlrun \[options\]' "$d/help"
check "--version names the library" sh -c "'$AMLRUN' --version | grep -q 'libamldist'"

for bad in "--bogus x" "--nproc-per-node 0 true" "--nproc-per-node many true" \
           "--nnodes 1:4 true" "--master-port 70000 true" "--term-timeout -1 true" \
           "--module --no-python x" "--ranks 1,,2 true" "--mode fast true" "" \
           "--standalone --nnodes 2 true" "--tee 5 true" "--nproc-per-node"; do
    "$AMLRUN" $bad >/dev/null 2>"$d/err"
    rc=$?
    expect_eq "usage error '$bad': status 2" "$rc" 2
    check "usage error '$bad': one 'amlrun:' line" test "$(grep -c '^amlrun: ' "$d/err")" = 1
done

# --- commands that cannot run: the status of a shell, one message
"$AMLRUN" --nproc-per-node 4 ./no-such-program >/dev/null 2>"$d/err"
expect_eq "missing command: 127" "$?" 127
expect_eq "missing command: reported once" "$(grep -c 'No such file or directory' "$d/err")" 1
"$AMLRUN" --nproc-per-node 4 no-such-program-in-path >/dev/null 2>"$d/err"
expect_eq "missing command in PATH: 127" "$?" 127
printf 'echo hi\n' >"$d/noexec"; chmod 644 "$d/noexec"
"$AMLRUN" --nproc-per-node 4 "$d/noexec" >/dev/null 2>"$d/err"
expect_eq "not executable: 126" "$?" 126
expect_eq "not executable: reported once" "$(grep -c 'Permission denied' "$d/err")" 1
check "not executable: the message names rank and path" \
    grep -q "^amlrun: rank 0 (local 0): cannot run $d/noexec: Permission denied$" "$d/err"
printf 'echo "no shebang $RANK"\n' >"$d/script"; chmod 755 "$d/script"
out=$("$AMLRUN" --nproc-per-node 2 "$d/script" | sort)
expect_eq "script without #! runs under /bin/sh" "$out" "$(printf 'no shebang 0\nno shebang 1')"
"$AMLRUN" --nproc-per-node 2 "$TORCH_PY" -c 'import os; exit(int(os.environ["RANK"]) * 0 + 0)'
expect_eq "a job whose workers all exit 0: 0" "$?" 0

# --- Python: .py files, -m, --no-python, the legacy --local_rank
printf 'import os, sys\nprint(os.environ["RANK"], sys.argv[1:], int("-u" in sys.orig_argv), sys.executable)\n' >"$d/t.py"
out=$("$AMLRUN" --nproc-per-node 2 "$d/t.py" a -b | sort)
expect_eq ".py runs under \$AMLRUN_PYTHON -u with its arguments" "$out" \
    "$(printf "0 ['a', '-b'] 1 %s\n1 ['a', '-b'] 1 %s" "$TORCH_PY" "$TORCH_PY")"
out=$(cd "$d" && "$AMLRUN" -m t x 2>&1)
expect_eq "-m runs a module" "$out" "0 ['x'] 1 $TORCH_PY"
out=$(env -u AMLRUN_PYTHON "$AMLRUN" --python "$TORCH_PY" "$d/t.py" 2>&1)
expect_eq "--python picks the interpreter" "$out" "0 [] 1 $TORCH_PY"
chmod 755 "$d/t.py"; printf '#!/bin/sh\necho "direct $*"\n' >"$d/d.py"; chmod 755 "$d/d.py"
out=$("$AMLRUN" --no-python "$d/d.py" x)
expect_eq "--no-python execs the .py file itself" "$out" "direct x"
out=$("$AMLRUN" --nproc-per-node 2 --legacy-launch "$d/t.py" z | sort)
expect_eq "--legacy-launch appends --local_rank=N first" "$out" \
    "$(printf "0 ['--local_rank=0', 'z'] 1 %s\n1 ['--local_rank=1', 'z'] 1 %s" "$TORCH_PY" "$TORCH_PY")"
out=$("$AMLRUN" --nproc-per-node 2 --legacy-launch --use_env "$d/t.py" z | sort | head -1)
expect_eq "--legacy-launch --use_env: no --local_rank" "$out" "0 ['z'] 1 $TORCH_PY"
ln -s "$AMLRUN" "$d/launch.py"
out=$("$d/launch.py" --nproc_per_node 1 "$d/t.py")
expect_eq "amlrun named launch.py behaves as launch.py (legacy)" "$out" "0 ['--local_rank=0'] 1 $TORCH_PY"
out=$("$AMLRUN" --nproc-per-node 1 "$d/t.py")
expect_eq "default (torchrun): no --local_rank" "$out" "0 [] 1 $TORCH_PY"

# --- --dry-run: per rank, the environment and the command; nothing runs
out=$(env -u OMP_NUM_THREADS "$AMLRUN" --dry-run --nproc-per-node 2 --nnodes 2 --node-rank 1 \
      --master-addr 10.0.0.1 --master-port 1234 "$d/t.py" "a b" 2>/dev/null)
expect_eq "--dry-run: a mode line and one line per rank" "$(echo "$out" | wc -l)" 3
check "--dry-run: the mode is said" sh -c "echo '$out' | head -1 | grep -q '^amlrun: mode: per-node (--nproc-per-node given'"
line=$(echo "$out" | grep '^rank 3 ')
for v in RANK=3 LOCAL_RANK=1 WORLD_SIZE=4 NODE_RANK=1 MASTER_ADDR=10.0.0.1 MASTER_PORT=1234 OMP_NUM_THREADS=1 TORCHELASTIC_RESTART_COUNT=0; do
    check "--dry-run rank 3 has $v" sh -c "echo \"\$1\" | grep -q ' $v '" _ "$line"
done
check "--dry-run: the command, quoted" sh -c "echo \"\$1\" | grep -q -- \" -- $TORCH_PY -u $d/t.py 'a b'\$\"" _ "$line"
check "--dry-run: only what differs from amlrun's environment" sh -c "! echo \"\$1\" | grep -q ' PATH='" _ "$line"
"$AMLRUN" --dry-run --nproc-per-node 2 sh -c "touch $d/ran" >/dev/null 2>&1
check "--dry-run starts nothing" test ! -e "$d/ran"
out=$($MPIRUN -np 2 "$AMLRUN" --dry-run true 2>/dev/null | grep -c '^rank')
expect_eq "--dry-run in per-process mode: one line per process" "$out" 2

# --- GPUs: none on this machine unless sysfs says so
ngpu=$(for f in /sys/bus/pci/devices/*; do
    [ "$(cat "$f/vendor")" = 0x10de ] && case $(cat "$f/class") in 0x0300*|0x0302*) echo;; esac
done | wc -l)
if [ "$ngpu" = 0 ]; then
    "$AMLRUN" --nproc-per-node gpu true 2>"$d/err"
    expect_eq "--nproc-per-node gpu without GPUs: usage error" "$?" 2
    check "--nproc-per-node gpu without GPUs: says so" grep -q "no NVIDIA GPU" "$d/err"
    cores=$("$TORCH_PY" -c 'import os; print(len(os.sched_getaffinity(0)))')
    out=$("$AMLRUN" --nproc-per-node auto --cpu-bind none sh -c 'echo $LOCAL_WORLD_SIZE' | sort -u)
    expect_eq "--nproc-per-node auto without GPUs: one per core" "$out" "$cores"
else
    out=$("$AMLRUN" --nproc-per-node gpu --cpu-bind none sh -c 'echo $LOCAL_WORLD_SIZE' | sort -u)
    expect_eq "--nproc-per-node gpu: one per GPU" "$out" "$ngpu"
fi
