#!/usr/bin/env bash
# Each rank's environment in the three modes, with real mpirun: per-node
# standalone (one and two "nodes"), per-process under mpirun (exec in place:
# the same pid), per-node under mpirun.  Plus: no descriptor of amlrun
# leaks into a worker.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
d=$TEST_TMP/env
mkdir -p "$d"
show='echo "$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $NODE_RANK $GROUP_RANK $MASTER_ADDR $MASTER_PORT $TORCHELASTIC_RESTART_COUNT $TORCHELASTIC_MAX_RESTARTS $TORCHELASTIC_RUN_ID"'

# --- per-node standalone, 4 workers
out=$("$AMLRUN" --nproc-per-node 4 --master-port 29611 --run-id job7 sh -c "$show" | sort -n)
expect_eq "per-node: 4 ranks with torchrun's variables" "$out" \
"0 0 4 4 0 0 127.0.0.1 29611 0 0 job7
1 1 4 4 0 0 127.0.0.1 29611 0 0 job7
2 2 4 4 0 0 127.0.0.1 29611 0 0 job7
3 3 4 4 0 0 127.0.0.1 29611 0 0 job7"

# --- per-node, node 1 of 2, torchrun and launch.py spellings
out=$("$AMLRUN" --no-node-check --nnodes=2 --node_rank=1 --nproc_per_node=2 --master_addr=10.1.2.3 --master_port=29612 --max_restarts=4 sh -c "$show" | sort -n)
expect_eq "per-node: node 1 of 2 (underscore spellings)" "$out" \
"2 0 4 2 1 1 10.1.2.3 29612 0 4 none
3 1 4 2 1 1 10.1.2.3 29612 0 4 none"

# --- OMP_NUM_THREADS: 1 by default with several workers, the user's kept
out=$("$AMLRUN" --nproc-per-node 2 --cpu-bind none sh -c 'echo $OMP_NUM_THREADS' 2>"$d/err" | sort -u)
expect_eq "OMP_NUM_THREADS defaults to 1 with 2 workers" "$out" 1
check "OMP_NUM_THREADS default is announced once" test "$(grep -c OMP_NUM_THREADS "$d/err")" = 1
out=$(OMP_NUM_THREADS=7 "$AMLRUN" --nproc-per-node 2 sh -c 'echo $OMP_NUM_THREADS' | sort -u)
expect_eq "OMP_NUM_THREADS set by the user is kept" "$out" 7

# --- --standalone picks a free port itself
p1=$("$AMLRUN" --standalone sh -c 'echo $MASTER_ADDR:$MASTER_PORT')
check "--standalone: 127.0.0.1 and a port ($p1)" sh -c "echo '$p1' | grep -Eq '^127\.0\.0\.1:[0-9]+$'"
port=${p1#*:}
check "--standalone: the port is free to bind" "$TORCH_PY" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', $port))"

# --- per-process under mpirun: the layout from Open MPI, exec in place
out=$($MPIRUN -np 4 sh -c 'echo "outer $OMPI_COMM_WORLD_RANK $$"; exec "$0" sh -c "echo inner \$RANK \$\$"' "$AMLRUN" 2>"$d/err")
same=$(echo "$out" | awk '{pid[$1" "$2]=$3} END {n=0; for (r=0;r<4;r++) if (pid["outer "r] != "" && pid["outer "r] == pid["inner "r]) n++; print n}')
expect_eq "per-process: each rank runs in amlrun's place (same pid)" "$same" 4
out=$($MPIRUN -np 4 "$AMLRUN" --master-port 29613 sh -c "$show" 2>"$d/err" | sort -n)
expect_eq "per-process under mpirun -np 4: ranks from Open MPI" "$out" \
"0 0 4 4 0 0 127.0.0.1 29613 0 0 none
1 1 4 4 0 0 127.0.0.1 29613 0 0 none
2 2 4 4 0 0 127.0.0.1 29613 0 0 none
3 3 4 4 0 0 127.0.0.1 29613 0 0 none"
$MPIRUN -np 2 "$AMLRUN" -v true 2>"$d/err"
check "per-process: --verbose names the mode and the source" \
    grep -q "mode: per-process (started by a launcher: layout from ompi" "$d/err"
$MPIRUN -np 2 "$AMLRUN" sh -c 'exit $((RANK + 3))' 2>/dev/null
check "per-process: mpirun sees the worker's own exit status" test "$?" -ne 0

# --- per-node under mpirun: node rank and count from Open MPI (the two
# amlruns meet on this machine, at a port of their own)
p=$(free_port)
out=$($MPIRUN -np 2 "$AMLRUN" --nproc-per-node 2 --master-port "$p" sh -c "$show" 2>"$d/err" | sort -n)
expect_eq "per-node under mpirun -np 2, 2 per node: 4 ranks" "$(echo "$out" | cut -d' ' -f1,3,7,8 | tr '\n' ' ')" \
    "0 4 127.0.0.1 $p 1 4 127.0.0.1 $p 2 4 127.0.0.1 $p 3 4 127.0.0.1 $p "
# a worker that links libamldist sees its own layout, not amlrun's OMPI_*
"$TORCH_PY" - "$BUILD/lib/libamldist.so.1" >"$d/probe.py" <<'PY'
import sys
print('''import ctypes, os, sys
lib = ctypes.CDLL(%r)
h = ctypes.c_void_p()
rc = lib.amldist_init(ctypes.byref(h), 0)
if rc != 0:
    lib.amldist_last_error.restype = ctypes.c_char_p
    print("ERR", lib.amldist_last_error().decode()); sys.exit(1)
print(lib.amldist_rank(h), lib.amldist_world_size(h), lib.amldist_local_rank(h), os.environ["OMPI_COMM_WORLD_RANK"])''' % sys.argv[1])
PY
out=$($MPIRUN -np 2 "$AMLRUN" --nproc-per-node 2 --master-port "$(free_port)" "$TORCH_PY" "$d/probe.py" 2>"$d/err" | sort -n)
expect_eq "per-node under mpirun: libamldist in a worker sees its own layout" \
    "$(echo "$out" | cut -d' ' -f1-3 | tr '\n' ' ')" "0 4 0 1 4 1 2 4 2 3 4 3 "

# --- no descriptor of amlrun leaks into a worker (with logs, prefixes, a
# console filter, restarts): a worker sees exactly the descriptors a
# torchrun worker sees (Python's subprocess with close_fds: the standard
# three, none of what this shell passes on); in per-process mode, amlrun
# execs in place and the command sees what this shell passes on
# (but a Python worker's one deliberate descriptor: the write end of its
# stack channel, launcher/stacks/, a pipe that never blocks, counted apart;
# and every worker's progress page, the memfd AMLDIST_PROGRESS_FD names,
# lib/progress/page.h, left out)
lsfd='import os; print(sorted(int(f) for f in os.listdir("/proc/self/fd") if f != os.environ.get("AMLDIST_PROGRESS_FD")))'
lschan='import os, stat
def chan(fd):
    try:
        flags = int(open("/proc/self/fdinfo/%d" % fd).read().split()[3], 8)
        return fd > 2 and stat.S_ISFIFO(os.fstat(fd).st_mode) and flags & 0o4003 == 0o4001
    except OSError:
        return False
fds = sorted(int(f) for f in os.listdir("/proc/self/fd") if f != os.environ.get("AMLDIST_PROGRESS_FD"))
print([f for f in fds if not chan(f)], len([f for f in fds if chan(f)]))'
base=$("$TORCH_PY" -c "$lsfd")
closed=$("$TORCH_PY" -c 'import subprocess, sys; subprocess.run([sys.executable, "-c", sys.argv[1]], close_fds=True)' "$lsfd")
out=$("$AMLRUN" --nproc-per-node 2 --prefix --log-dir "$d/logs" --ranks 0 "$TORCH_PY" -c "$lschan")
expect_eq "no fd of amlrun, or of this shell, leaks into workers (a Python one has its stack channel)" "$out" "[rank0]:$closed 1"
out=$("$AMLRUN" --max-restarts 1 sh -c '[ "$TORCHELASTIC_RESTART_COUNT" = 1 ] && exec "$0" -c "$1"; exit 1' "$TORCH_PY" "$lsfd" 2>/dev/null)
expect_eq "no fd leaks into restarted workers" "$out" "$closed"
out=$("$AMLRUN" --mode process "$TORCH_PY" -c "$lsfd")
expect_eq "per-process: amlrun adds no descriptor" "$out" "$base"
out=$("$AMLRUN" --nproc-per-node 1 "$TORCH_PY" -c 'import os, stat; fd = int(os.environ["AMLDIST_PROGRESS_FD"]); print(os.readlink("/proc/self/fd/%d" % fd).startswith("/memfd:"), stat.S_ISREG(os.fstat(fd).st_mode))' 2>/dev/null)
expect_eq "the descriptor left out: the progress page, a memfd" "$out" "True True"
