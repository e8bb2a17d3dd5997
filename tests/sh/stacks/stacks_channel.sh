#!/usr/bin/env bash
# A Python worker's stack channel through real amlrun (launcher/stacks/):
# a worker that runs Python (a .py file, python3 itself) has amlrun's
# faulthandler hook on the stack signal, from the build tree and from an
# installed tree, and otherwise sees what it would without amlrun (its
# PYTHONPATH, its sitecustomize, no amlrun variable); a native worker gets
# nothing; python3 -S runs as usual.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
d=$TEST_TMP/chan
mkdir -p "$d"

# The hook's signal (SIGRTMAX - 6) caught, from /proc/self/status.
caught='import os, signal
sig = signal.SIGRTMAX - 6
cgt = int([l for l in open("/proc/self/status") if l.startswith("SigCgt:")][0].split()[1], 16)
print("hooked" if cgt >> (sig - 1) & 1 else "plain")'
seen='import os, sys
m = sys.modules.get("sitecustomize")
print(getattr(m, "__file__", None), os.environ.get("PYTHONPATH", "-"),
      [k for k in os.environ if k.startswith("AMLDIST_STACK")], sys.path[1:])'

out=$("$AMLRUN" --nproc-per-node 2 "$TORCH_PY" -c "$caught" | sort -u)
expect_eq "python3 workers take the hook" "$out" hooked
printf '%s\n' "$caught" >"$d/caught.py"
out=$("$AMLRUN" "$d/caught.py")
expect_eq "a .py file's worker takes the hook" "$out" hooked
out=$("$AMLRUN" "$TORCH_PY" -S -c "$caught")
expect_eq "python3 -S runs, without the hook" "$out" plain
out=$("$AMLRUN" sh -c 'echo "${AMLDIST_STACK_FD:-none} ${PYTHONPATH:-none}"')
expect_eq "a native worker gets no channel" "$out" "none none"

# What the program sees of its own Python is what it sees without amlrun.
for pp in "" "$d/mine"; do
    want=$(env ${pp:+PYTHONPATH=$pp} "$TORCH_PY" -c "$seen")
    out=$(env ${pp:+PYTHONPATH=$pp} "$AMLRUN" "$TORCH_PY" -c "$seen")
    expect_eq "the worker sees its own sitecustomize, sys.path, PYTHONPATH (${pp:-unset})" "$out" "$want"
done

# Installed elsewhere: amlrun finds the hook beside itself.
tmake BUILD="$BUILD" install PREFIX=/opt/amldist DESTDIR="$d/dest" >"$d/log" 2>&1
expect_eq "make install: exit 0" "$?" 0
out=$("$d/dest/opt/amldist/bin/amlrun" "$TORCH_PY" -c "$caught")
expect_eq "an installed amlrun's python3 worker takes the hook" "$out" hooked
