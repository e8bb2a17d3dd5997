#!/usr/bin/env bash
# amlrun's command line: help, usage errors (status 2), commands that cannot
# run (126/127, reported once), Python wrapping, the legacy --local_rank,
# --dry-run, --nproc-per-node gpu/auto/cpu, torchrun's options and PET_*
# variables, the torchrun defaults in every worker's environment.
. "$(dirname "$0")/../../lib.sh"
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
           "--standalone --nnodes 2 true" "--tee 5 true" "--nproc-per-node" \
           "--start-method thread true" "--monitor-interval x true" \
           "--monitor-interval -1 true" "--rdzv-conf a true" "--rdzv-conf a=1, true" \
           "--rdzv-conf join_timeout=0 true" "--rdzv-conf read_timeout=1.5 true" \
           "--rdzv-conf is_host=maybe true" "--rdzv_conf timeout= true" "--role"; do
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
"$AMLRUN" --nproc-per-node 4 --no-python "$d/noexec" >/dev/null 2>"$d/err"
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
out=$(cd "$d" && "$AMLRUN" -m t x 2>&1 | no_success_line)
expect_eq "-m runs a module" "$out" "0 ['x'] 1 $TORCH_PY"
out=$(env -u AMLRUN_PYTHON "$AMLRUN" --python "$TORCH_PY" "$d/t.py" 2>&1 | no_success_line)
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
expect_eq "--dry-run: mode and command lines and one line per rank" "$(echo "$out" | wc -l)" 4
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
online=$(getconf _NPROCESSORS_ONLN)
out=$("$AMLRUN" --dry-run --nproc-per-node cpu true 2>/dev/null | grep -c '^rank ')
expect_eq "--nproc-per-node cpu: one per CPU online (torchrun's os.cpu_count())" "$out" "$online"
if [ "$online" -gt 1 ]; then
    out=$(taskset -c 0 "$AMLRUN" --dry-run --nproc-per-node cpu true 2>/dev/null | grep -c '^rank ')
    expect_eq "--nproc-per-node cpu under taskset -c 0: still every CPU online" "$out" "$online"
    out=$(taskset -c 0 "$AMLRUN" --dry-run --nproc-per-node auto true 2>/dev/null | grep -c '^rank ')
    [ "$ngpu" = 0 ] && expect_eq "--nproc-per-node auto under taskset -c 0: the one core" "$out" 1
fi

# --- a script without .py: python when it is a file that cannot be executed
printf 'import sys\nprint("py", sys.argv[1:])\n' >"$d/script_noext"; chmod 644 "$d/script_noext"
out=$("$AMLRUN" "$d/script_noext" a 2>&1 | no_success_line)
expect_eq "a file without execute permission runs under python" "$out" "py ['a']"
out=$(cd "$d" && "$AMLRUN" script_noext b 2>&1 | no_success_line)
expect_eq "... also a name in the current directory that PATH lacks" "$out" "py ['b']"
out=$("$AMLRUN" --dry-run "$d/script_noext" 2>&1 | sed -n 2p)
expect_eq "--dry-run says it runs under python, and why" "$out" \
    "amlrun: command: $d/script_noext: a file without execute permission, a script as torchrun sees it (--no-python executes it); runs under $TORCH_PY -u"
out=$("$AMLRUN" --dry-run env 2>&1 | sed -n 2p)
expect_eq "--dry-run says a name is looked up in PATH" "$out" \
    "amlrun: command: env: found in PATH as $(command -v env); executed as it is"
out=$("$AMLRUN" -v --no-python "$d/d.py" 2>&1 >/dev/null | grep 'command:')
expect_eq "-v says an executable runs as it is" "$out" \
    "amlrun: command: $d/d.py: --no-python, a path; executed as it is"
out=$("$AMLRUN" "$d/script" 2>&1 | no_success_line)
expect_eq "an executable without .py is executed, not run by python" "$out" "no shebang 0"
mkdir -p "$d/bin"; cp "$d/script_noext" "$d/bin/script_noext"; chmod 755 "$d/bin/script_noext"
printf '#!/bin/sh\necho "from PATH"\n' >"$d/bin/script_noext"
out=$(cd "$d" && PATH="$d/bin:$PATH" "$AMLRUN" script_noext 2>&1 | no_success_line)
expect_eq "a name found in PATH wins over a file in the current directory" "$out" "from PATH"
"$AMLRUN" --no-python "$d/script_noext" >/dev/null 2>&1
expect_eq "--no-python: a file without execute permission is 126" "$?" 126
out=$(PET_NO_PYTHON=1 "$AMLRUN" "$d/d.py" y 2>&1 | no_success_line)
expect_eq "PET_NO_PYTHON=1 is --no-python" "$out" "direct y"
out=$(PET_NO_PYTHON=0 "$AMLRUN" "$d/t.py" 2>&1 | no_success_line)
expect_eq "PET_NO_PYTHON=0 is off" "$out" "0 [] 1 $TORCH_PY"

# --- --run-path: runpy.run_path() in a python, as torchrun; it beats --no-python
printf 'import sys\nprint(__name__, sys.argv)\n' >"$d/rp"
out=$("$AMLRUN" --run-path --no-python "$d/rp" x --y 2>&1 | no_success_line)
expect_eq "--run-path runs the file as __main__ with its arguments" "$out" \
    "__main__ ['$d/rp', 'x', '--y']"
out=$("$AMLRUN" --run_path --legacy-launch "$d/rp" z 2>&1 | no_success_line)
expect_eq "--run-path --legacy-launch: --local_rank first" "$out" \
    "__main__ ['$d/rp', '--local_rank=0', 'z']"
out=$(cd "$d" && "$AMLRUN" --nproc-per-node 2 --legacy-launch -m t z | sort | head -1)
expect_eq "-m --legacy-launch: module, --local_rank, arguments" "$out" \
    "0 ['--local_rank=0', 'z'] 1 $TORCH_PY"

# --- the interpreter: --python, $AMLRUN_PYTHON, then torchrun's $PYTHON_EXEC
out=$(env -u AMLRUN_PYTHON PYTHON_EXEC="$TORCH_PY" "$AMLRUN" "$d/t.py" 2>&1 | no_success_line)
expect_eq "PYTHON_EXEC (torchrun's) when AMLRUN_PYTHON is not set" "$out" "0 [] 1 $TORCH_PY"
out=$(PYTHON_EXEC=/nonexistent "$AMLRUN" "$d/t.py" 2>&1 | no_success_line)
expect_eq "AMLRUN_PYTHON beats PYTHON_EXEC" "$out" "0 [] 1 $TORCH_PY"

# --- torchrun's options and its PET_* variables
dry() { "$AMLRUN" --dry-run --no-python "$@" true 2>&1 | grep '^rank 0 '; }
has() { case " $2 " in *" $1 "*) return 0;; esac; return 1; }
lacks() { case " $2 " in *" $1="*) return 1;; esac; return 0; }
line=$(dry --nproc-per-node 2)
check "ROLE_NAME=default (torchrun's default)" has ROLE_NAME=default "$line"
check "NCCL_ASYNC_ERROR_HANDLING=1 (torch unknown: --no-python true)" has NCCL_ASYNC_ERROR_HANDLING=1 "$line"
check "TORCH_NCCL_ASYNC_ERROR_HANDLING=1 (torch unknown: both names)" has TORCH_NCCL_ASYNC_ERROR_HANDLING=1 "$line"
line=$(NCCL_ASYNC_ERROR_HANDLING=0 "$AMLRUN" --dry-run -v --no-python env 2>&1 | grep '^rank 0 ')
check "a user's NCCL_ASYNC_ERROR_HANDLING=0 is kept" has NCCL_ASYNC_ERROR_HANDLING=0 "$line"
check "... and no TORCH_NCCL_ASYNC_ERROR_HANDLING is added" lacks TORCH_NCCL_ASYNC_ERROR_HANDLING "$line"
line=$(TORCH_NCCL_ASYNC_ERROR_HANDLING=3 "$AMLRUN" --dry-run -v --no-python env 2>&1 | grep '^rank 0 ')
check "a user's TORCH_NCCL_ASYNC_ERROR_HANDLING=3 is kept" has TORCH_NCCL_ASYNC_ERROR_HANDLING=3 "$line"
check "... and no NCCL_ASYNC_ERROR_HANDLING is added" lacks NCCL_ASYNC_ERROR_HANDLING "$line"
line=$(dry --role trainer --monitor_interval 0.5 --start_method forkserver \
       --rdzv_conf ' join_timeout = 30 ,read_timeout=5, is_host=False,store_type=tcp,x=y')
check "--role: ROLE_NAME; --monitor-interval, --start-method, --rdzv-conf accepted" has ROLE_NAME=trainer "$line"
line=$(dry --rdzv-endpoint 10.0.0.7:4242 --master-addr 10.0.0.1 --master-port 1)
check "--rdzv-endpoint beats --master-addr whatever the order (torchrun)" \
    has MASTER_ADDR=10.0.0.7 "$line"
check "... and --master-port" has MASTER_PORT=4242 "$line"
line=$(PET_RDZV_ENDPOINT=10.0.0.8:4343 dry --master-addr 10.0.0.1)
check "PET_RDZV_ENDPOINT beats --master-addr too (torchrun)" has MASTER_ADDR=10.0.0.8 "$line"
line=$(PET_NNODES=2 PET_NODE_RANK=1 PET_NPROC_PER_NODE=2 PET_MASTER_ADDR=10.0.0.2 \
       PET_MASTER_PORT=5555 PET_RDZV_ID=job9 PET_MAX_RESTARTS=3 PET_ROLE=worker \
       PET_RDZV_BACKEND=static PET_RDZV_CONF=join_timeout=9 PET_MONITOR_INTERVAL=1 \
       PET_START_METHOD=fork "$AMLRUN" --dry-run --no-python true 2>&1 | grep '^rank 3 ')
for v in RANK=3 WORLD_SIZE=4 LOCAL_RANK=1 NODE_RANK=1 MASTER_ADDR=10.0.0.2 MASTER_PORT=5555 \
         TORCHELASTIC_RUN_ID=job9 TORCHELASTIC_MAX_RESTARTS=3 ROLE_NAME=worker; do
    check "PET_* configure amlrun as torchrun: $v" has "$v" "$line"
done
out=$(PET_NPROC_PER_NODE=3 PET_ROLE=x "$AMLRUN" --dry-run --nproc_per_node 2 --role y --no-python true 2>&1)
expect_eq "a command-line option beats its PET_ variable" \
    "$(echo "$out" | grep -c '^rank .*ROLE_NAME=y ')" 2
out=$(PET_STANDALONE=1 PET_MASTER_PORT=6000 "$AMLRUN" --dry-run --no-python true 2>&1 | grep '^rank 0 ')
check "PET_STANDALONE=1 is --standalone" has MASTER_ADDR=127.0.0.1 "$out"
for bad in PET_NNODES=x PET_NPROC_PER_NODE=0 PET_NODE_RANK=-1 PET_MASTER_PORT=99999 \
           PET_MAX_RESTARTS=many PET_STANDALONE=yes PET_MODULE= PET_ROLE= \
           PET_START_METHOD=thread PET_RDZV_CONF=k PET_RDZV_BACKEND=zookeeper; do
    env "$bad" "$AMLRUN" --no-python true >/dev/null 2>"$d/err"
    expect_eq "malformed $bad: status 2" "$?" 2
    check "malformed $bad: the message names the variable" grep -q "^amlrun: ${bad%%=*}=" "$d/err"
done
env PET_NNODES=x "$AMLRUN" --nnodes 1 --no-python true >/dev/null 2>&1
expect_eq "a PET_ variable the command line overrides is not read" "$?" 0
