#!/usr/bin/env bash
# amlrun's own output to a non-blocking stdout (O_NONBLOCK set by whoever
# shares the pipe: a Python harness, a shell's pipeline) whose reader is
# slow: --dry-run of many ranks, --topo, --help, --dry-run in place and of a
# head node arrive whole, byte for byte as to a file, with exit 0.  The
# reader waits until the pipe (made as small as Linux allows) is full, or
# amlrun has ended, before it reads: stdio dropped what did not fit.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
d=$TEST_TMP

cat >"$d/slow.py" <<'EOF'
import array, fcntl, os, subprocess, sys, termios, time
r, w = os.pipe()
F_SETPIPE_SZ = 1031
try:
    fcntl.fcntl(w, F_SETPIPE_SZ, 4096)
except OSError:
    pass
fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)
p = subprocess.Popen(sys.argv[2:], stdout=w, stderr=subprocess.DEVNULL)
os.close(w)
# The slow reader: nothing is read until amlrun is done or its writes
# have stopped with bytes in the pipe (full: a write that does not fit
# whole in what is left waits for a new page).
buf = array.array("i", [0])
last, still = -1, 0
while p.poll() is None and still < 20:
    fcntl.ioctl(r, termios.FIONREAD, buf, True)
    still = still + 1 if buf[0] == last and buf[0] > 0 else 0
    last = buf[0]
    time.sleep(0.01)
data = bytearray()
while True:
    chunk = os.read(r, 65536)
    if not chunk:
        break
    data += chunk
rc = p.wait()
open(sys.argv[1], "wb").write(data)
sys.exit(rc)
EOF

# same NAME ARGS...: amlrun ARGS to a slow non-blocking pipe gives what it
# gives to a file, all of it, exit 0.
same() {
    local name=$1; shift
    "$AMLRUN" "$@" >"$d/want" 2>/dev/null
    local want_rc=$?
    "$TORCH_PY" "$d/slow.py" "$d/got" "$AMLRUN" "$@"
    local rc=$?
    local n m
    n=$(wc -c <"$d/want"); m=$(wc -c <"$d/got")
    if [ "$rc" = 0 ] && [ "$want_rc" = 0 ] && [ "$n" -gt 4096 ] && cmp -s "$d/want" "$d/got"; then
        ok "$name ($n bytes)"
    else
        fail "$name"; diag "exit $rc (to a file: $want_rc), $m bytes of $n"
    fi
}

T=/work/shared/topologies/hwloc-tests/nvidiaDGX2.xml
same "--dry-run of 400 ranks" -q --dry-run --cpu-bind none --nproc-per-node 400 true
if [ -r "$T" ]; then
    same "--dry-run of 16 ranks on a DGX-2's topology" -q --dry-run --topology "$T" --nproc-per-node 16 true
    same "--topo of a DGX-2" --topo --topology "$T"
else
    skip "--topo of a DGX-2" "no $T"
fi
same "--help" --help
same "--dry-run in place, a long command line" -q --dry-run --mode process \
    sh -c "$(printf 'echo %0100d; ' $(seq 60))"
