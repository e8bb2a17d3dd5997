#!/usr/bin/env bash
# A Python worker's stack channel through real amlrun (launcher/stacks/):
# a worker that runs Python (a .py file, python3 itself) has amlrun's
# faulthandler hook on the stack signal, from the build tree and from an
# installed tree, and otherwise sees what it would without amlrun (its
# PYTHONPATH, its sitecustomize, its LD_PRELOAD, no amlrun variable, and so
# do the Pythons it starts) while amlrun's guard is preloaded into it; a
# native worker gets nothing; python3 -S runs as usual, -I without guard;
# the program asking libc for the signal's handler is told faulthandler's.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
d=$TEST_TMP/chan
mkdir -p "$d"

# The hook's signal (SIGRTMAX - 6) caught, from /proc/self/status.
caught='import os, signal
sig = signal.SIGRTMAX - 6
cgt = int([l for l in open("/proc/self/status") if l.startswith("SigCgt:")][0].split()[1], 16)
print("hooked" if cgt >> (sig - 1) & 1 else "plain")'
seen='import os, subprocess, sys
m = sys.modules.get("sitecustomize")
print(getattr(m, "__file__", None), os.environ.get("PYTHONPATH", "-"),
      os.environ.get("LD_PRELOAD", "-"),
      [k for k in os.environ if k.startswith("AMLDIST_STACK")], sys.path[1:])
sys.stdout.flush()
subprocess.run([sys.executable, "-c", "import os; print(\"child\", os.environ.get(\"LD_PRELOAD\", \"-\"), \"stack-guard\" in open(\"/proc/self/maps\").read(), [k for k in os.environ if k.startswith(\"AMLDIST_STACK\")])"])'
# Whether amlrun's guard is in the worker itself.
guarded='import os
print("guarded" if "/lib/amldist/stack-guard.so" in open("/proc/self/maps").read() else "bare")'

out=$("$AMLRUN" --nproc-per-node 2 "$TORCH_PY" -c "$caught" | sort -u)
expect_eq "python3 workers take the hook" "$out" hooked
printf '%s\n' "$caught" >"$d/caught.py"
out=$("$AMLRUN" "$d/caught.py")
expect_eq "a .py file's worker takes the hook" "$out" hooked
out=$("$AMLRUN" "$TORCH_PY" -S -c "$caught")
expect_eq "python3 -S runs, without the hook" "$out" plain
out=$("$AMLRUN" sh -c 'echo "${AMLDIST_STACK_FD:-none} ${PYTHONPATH:-none}"')
expect_eq "a native worker gets no channel" "$out" "none none"

# What the program and the Pythons it starts see of their environment is
# what they see without amlrun: their PYTHONPATH, the user's own
# LD_PRELOAD (an object of the test's), nothing of amlrun's guard.
printf 'int amldist_test_mine(void) { return 1; }\n' >"$d/mine.c"
cc -shared -fPIC -o "$d/mine.so" "$d/mine.c" || fail "a user's preload builds"
for pre in "" "$d/mine.so"; do
    for pp in "" "$d/mine"; do
        want=$(env ${pp:+PYTHONPATH=$pp} ${pre:+LD_PRELOAD=$pre} "$TORCH_PY" -c "$seen")
        out=$(env ${pp:+PYTHONPATH=$pp} ${pre:+LD_PRELOAD=$pre} "$AMLRUN" "$TORCH_PY" -c "$seen")
        expect_eq "the worker and its child see their own sitecustomize, sys.path, PYTHONPATH (${pp:-unset}), LD_PRELOAD (${pre:-unset})" "$out" "$want"
    done
    out=$(env ${pre:+LD_PRELOAD=$pre} "$AMLRUN" "$TORCH_PY" -c "$guarded")
    expect_eq "a Python worker runs with amlrun's guard (LD_PRELOAD ${pre:-unset})" "$out" guarded
done
# The guard installs faulthandler's handler as a trampoline of its own
# (amlrun knows it by that in the kernel); the program, asking libc, is
# told faulthandler's, outside the guard, as without amlrun.
asked='import ctypes, signal
SIG = signal.SIGRTMAX - 6
class SA(ctypes.Structure):
    _fields_ = [("h", ctypes.c_void_p), ("mask", ctypes.c_ulong * 16),
                ("flags", ctypes.c_int), ("r", ctypes.c_void_p)]
old = SA()
assert ctypes.CDLL(None).sigaction(SIG, None, ctypes.byref(old)) == 0
for line in open("/proc/self/maps"):
    lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
    if lo <= (old.h or 0) < hi:
        print("in the guard" if "stack-guard" in line else "outside the guard")'
out=$("$AMLRUN" "$TORCH_PY" -c "$asked")
expect_eq "the program is told faulthandler's own handler, not the guard's" "$out" "outside the guard"
out=$("$AMLRUN" "$TORCH_PY" -I -c "$guarded")
expect_eq "python3 -I: no channel, no guard" "$out" bare
out=$("$AMLRUN" sh -c 'echo "${LD_PRELOAD:-none}"')
expect_eq "a native worker gets no guard" "$out" none

# Installed elsewhere: amlrun finds the hook beside itself.
tmake BUILD="$BUILD" install PREFIX=/opt/amldist DESTDIR="$d/dest" >"$d/log" 2>&1
expect_eq "make install: exit 0" "$?" 0
out=$("$d/dest/opt/amldist/bin/amlrun" "$TORCH_PY" -c "$caught")
expect_eq "an installed amlrun's python3 worker takes the hook" "$out" hooked
out=$("$d/dest/opt/amldist/bin/amlrun" "$TORCH_PY" -c "$guarded")
expect_eq "an installed amlrun's python3 worker runs with its guard" "$out" guarded
