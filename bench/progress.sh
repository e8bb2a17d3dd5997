#!/usr/bin/env bash
# The cost of a heartbeat (issue 20): amldist_progress() in C and
# amldist.progress() in Python, into amlrun's progress page (no system
# call), against a message over a Unix stream socket per heartbeat as
# NVIDIA's ft_launcher sends one to its rank monitor (a pickled message and
# a pickled reply, from Python; and 16 raw bytes and a reply from C), all
# on this machine in one run.  ROUNDS rounds; the median of each figure.
#     bench/progress.sh [ROUNDS] [CALLS]   (defaults 7 and 2000000: C calls
#                                           per round; Python CALLS/10,
#                                           socket messages CALLS/100)
set -eu
cd "$(dirname "$0")/.."
ROUNDS=${1:-7}
CALLS=${2:-2000000}
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
PY=${TORCH_PY:-/usr/bin/python3}
make -s BUILD="$BUILD" "$BUILD/bench/progress_bench" >/dev/null
DRV=$BUILD/bench/progress_bench
py_calls=$((CALLS / 10 > 0 ? CALLS / 10 : 1))
msgs=$((CALLS / 100 > 0 ? CALLS / 100 : 1))
tmp=$(mktemp "${TMPDIR:-/tmp}/amldist-progress.XXXXXX")
trap 'rm -f "$tmp"' EXIT
echo "# $ROUNDS rounds: $CALLS C calls, $py_calls Python calls, $msgs socket heartbeats each" \
    "($(env -u OMP_NUM_THREADS nproc) of $(nproc --all) cores usable, $(uname -r)," \
    "$("$PY" -c 'import platform; print("Python", platform.python_version())'))"
for _ in $(seq "$ROUNDS"); do
    "$DRV" page "$CALLS"
    "$DRV" nopage "$CALLS"
    "$DRV" socket "$msgs"
    PYTHONPATH=$PWD/python "$PY" - "$py_calls" "$msgs" <<'PY'
import os, pickle, socket, struct, sys, time

calls, msgs = int(sys.argv[1]), int(sys.argv[2])
now = time.perf_counter_ns

# The page as amlrun makes it (lib/progress/page.h), named in the
# environment before the first call.
import amldist
pg = sys.modules["amldist.progress"]
fd = os.memfd_create("bench-progress", 0)
os.ftruncate(fd, pg.HEADER + pg.SLOT_SIZE)
with open(fd, "r+b", closefd=False) as f:
    f.write(struct.pack("<QIIII", pg.MAGIC, 1, pg.SLOT_SIZE, pg.RING, pg.HEADER))
os.environ.update(AMLDIST_PROGRESS_FD=str(fd), AMLDIST_PROGRESS_SLOT="0")
progress = amldist.progress
progress(0)
assert pg._words is not None, "no page"
t0 = now()
for i in range(1, calls + 1):
    progress(i)
print(f"Python amldist.progress, page: {(now() - t0) / calls:.1f} ns")
mono = time.monotonic_ns
t0 = now()
for i in range(calls):
    mono()
print(f"Python time.monotonic_ns alone: {(now() - t0) / calls:.1f} ns")


# ft_launcher's heartbeat: a pickled message, length first, over a Unix
# stream socket; the rank monitor answers each with a pickled OK.
class HeartbeatMsg:
    def __init__(self, rank, state):
        self.rank, self.state = rank, state


def send(sock, obj):
    data = pickle.dumps(obj)
    sock.sendall(struct.pack("<I", len(data)) + data)


def recv(sock):
    head = sock.recv(4, socket.MSG_WAITALL)
    (n,) = struct.unpack("<I", head)
    return pickle.loads(sock.recv(n, socket.MSG_WAITALL))


a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
pid = os.fork()
if pid == 0:
    a.close()
    for _ in range(msgs):
        recv(b)
        send(b, "ok")
    os._exit(0)
b.close()
t0 = now()
for _ in range(msgs):
    send(a, HeartbeatMsg(0, {}))
    assert recv(a) == "ok"
print(f"Python Unix socket heartbeat and reply (pickled, as ft_launcher): "
      f"{(now() - t0) / msgs:.1f} ns")
os.waitpid(pid, 0)
PY
done >"$tmp"
awk -F': ' '{ sub(/ ns$/, "", $2); v[$1] = v[$1] " " $2; if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
END {
    for (k = 1; k <= n; k++) {
        m = split(substr(v[order[k]], 2), x, " ")
        for (i = 2; i <= m; i++) { t = x[i]; for (j = i - 1; j > 0 && x[j] + 0 > t + 0; j--) x[j + 1] = x[j]; x[j + 1] = t }
        med = (m % 2) ? x[(m + 1) / 2] : (x[m / 2] + x[m / 2 + 1]) / 2
        if (med >= 1000) printf "%-68s %9.2f us\n", order[k], med / 1000
        else printf "%-68s %9.1f ns\n", order[k], med
    }
}' "$tmp"
