#!/usr/bin/env bash
# The progress API under amlrun (issue 20, items 3 and 4): a C worker
# (amldist_progress) and a pure-Python one (amldist.progress, with no
# libamldist to load), rank 2 slower at every step: the job ends with the
# line naming rank 2, its node and host, and the steps it was counted over;
# not under -q, not for a job that never called, and after a restart over
# the new attempt's steps only.  Each worker gets the page's descriptor (a
# memfd) and its slot; the calls make no system call (strace counts them);
# without amlrun, or with bad values in the variables, a call returns 0.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
d=$TEST_TMP/progress
mkdir -p "$d"
unset PET_NPROC_PER_NODE PET_MAX_RESTARTS PET_MASTER_ADDR
EX=$BUILD/examples/progress_steps
PYW=$TOP/tests/amlrun/progress_worker.py
host=$(hostname)
# The line, with rank 2 named (M ms and K steps checked apart).
want="^amlrun: slowest rank 2: node 0 (host $host), [0-9.]* ms behind the median over [0-9]* steps\$"

# --- a C worker: rank 2 40 ms slower at each of 30 steps
"$AMLRUN" --nproc-per-node 4 "$EX" 30 5 2 40 >"$d/out" 2>"$d/err"
expect_eq "C workers: exit 0" "$?" 0
expect_eq "C workers: every rank did its steps" "$(grep -c 'steps$' "$d/out")" 4
check "C workers: the slowest rank is rank 2, with node and host" grep -q "$want" "$d/err" ||
    diag "$(cat "$d/err")"
expect_eq "C workers: over the 30 steps every rank reached" \
    "$(sed -n 's/.* over \([0-9]*\) steps$/\1/p' "$d/err")" 30
# Rank 2 ends about 30 x 40 ms behind; the median of its lags is about
# half of that (generous bounds: the machine is shared).
ms=$(sed -n 's/.*), \([0-9]*\)[0-9.]* ms behind.*/\1/p' "$d/err")
check "C workers: its lag is hundreds of ms (got ${ms:-none})" \
    test "${ms:-0}" -ge 200 -a "${ms:-0}" -le 5000

# --- -q silences it
"$AMLRUN" -q --nproc-per-node 4 "$EX" 30 5 2 40 >/dev/null 2>"$d/err"
expect_eq "-q: exit 0" "$?" 0
check "-q: no slowest-rank line" sh -c '! grep -q "slowest rank" "$0"' "$d/err"

# --- a job that never calls the API: no line
"$AMLRUN" --nproc-per-node 3 sh -c 'sleep 0.2' >/dev/null 2>"$d/err"
expect_eq "no API: exit 0" "$?" 0
check "no API: no slowest-rank line" sh -c '! grep -q "slowest rank" "$0"' "$d/err"

# --- a Python worker with no library anywhere (pure Python)
AMLDIST_LIBRARY=/nonexistent/libamldist.so.1 PYTHONPATH=$TOP/python \
    "$AMLRUN" --nproc-per-node 4 "$TORCH_PY" "$PYW" 30 5 2 40 >"$d/out" 2>"$d/err"
expect_eq "Python workers, no libamldist: exit 0" "$?" 0
expect_eq "Python workers: every rank did its steps" "$(grep -c 'steps$' "$d/out")" 4
check "Python workers: the slowest rank is rank 2" grep -q "$want" "$d/err" ||
    diag "$(cat "$d/err")"

# --- a restart: the slots start again, and the line counts the last
# attempt's steps (12), not the first's (30)
FAIL_FIRST=1 PYTHONPATH=$TOP/python "$AMLRUN" --max-restarts 1 --nproc-per-node 4 \
    "$TORCH_PY" -c 'import os, runpy, sys
n = "30" if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0" else "12"
sys.argv = [sys.argv[1], n, "5", "2", "40"]
runpy.run_path(sys.argv[0], run_name="__main__")' "$PYW" >"$d/out" 2>"$d/err"
expect_eq "restart: exit 0 after one restart" "$?" 0
check "restart: rank 2 named" grep -q "$want" "$d/err" || diag "$(cat "$d/err")"
expect_eq "restart: over the second attempt's 12 steps" \
    "$(sed -n 's/.* over \([0-9]*\) steps$/\1/p' "$d/err")" 12

# --- what each worker is given: a memfd, not a copy per worker, and its slot
"$AMLRUN" --nproc-per-node 2 sh -c \
    'echo "$LOCAL_RANK $AMLDIST_PROGRESS_SLOT $(readlink /proc/$$/fd/$AMLDIST_PROGRESS_FD)"' \
    >"$d/out" 2>"$d/err"
expect_eq "each worker: its slot is its local rank, the fd a memfd" \
    "$(sed 's/ (deleted)$//' "$d/out" | sort)" \
    "$(printf '0 0 /memfd:amldist-progress\n1 1 /memfd:amldist-progress')"

# --- without amlrun, and with bad values: nothing, and 0
env -u AMLDIST_PROGRESS_FD -u AMLDIST_PROGRESS_SLOT "$EX" 3 0 >/dev/null
expect_eq "C, no amlrun: amldist_progress returns 0" "$?" 0
got=$(env -u AMLDIST_PROGRESS_FD AMLDIST_LIBRARY=/nonexistent PYTHONPATH=$TOP/python \
    "$TORCH_PY" -c 'import amldist; print(amldist.progress(1), amldist.progress(2))' 2>&1)
expect_eq "Python, no amlrun and no library: amldist.progress returns 0" "$got" "0 0"
got=$(AMLDIST_LIBRARY=/nonexistent PYTHONPATH=$TOP/python "$TORCH_PY" -c '
import amldist
try:
    amldist.layout()
except ImportError as e:
    print("ImportError", "AMLDIST_LIBRARY" in str(e))' 2>&1)
expect_eq "Python, no library: the rest of the API still raises its ImportError" \
    "$got" "ImportError True"
for fd in abc -1 99 0 1 2 "" 4294967297; do
    AMLDIST_PROGRESS_FD=$fd AMLDIST_PROGRESS_SLOT=0 "$EX" 3 0 >/dev/null 2>&1
    c=$?
    got=$(AMLDIST_PROGRESS_FD=$fd AMLDIST_PROGRESS_SLOT=0 PYTHONPATH=$TOP/python \
        "$TORCH_PY" -c 'import amldist; print(amldist.progress(1))' 2>&1)
    expect_eq "AMLDIST_PROGRESS_FD='$fd': harmless in C and Python" "$c $got" "0 0"
done
# A page's descriptor with a slot it has not: the worker records nothing.
"$AMLRUN" --nproc-per-node 1 sh -c 'AMLDIST_PROGRESS_SLOT=7 "$0" 3 0 &&
    AMLDIST_PROGRESS_SLOT=x "$0" 3 0' "$EX" >/dev/null 2>"$d/err"
expect_eq "a slot the page has not: harmless" "$?" 0

# --- no system call per call: a million calls make as many as one
if have strace; then
    for n in 1 1000000; do
        "$AMLRUN" --nproc-per-node 1 sh -c \
            'echo "$AMLDIST_PROGRESS_FD" >"$0.fd"; exec strace -f -qq -o "$0" "$1" --loop "$2"' \
            "$d/trace.$n" "$EX" "$n" >/dev/null 2>"$d/err"
        [ $? -eq 0 ] || diag "strace run: $(cat "$d/err")"
    done
    fd=$(cat "$d/trace.1.fd")
    check "strace: the worker mapped the page (fd $fd, shared)" \
        grep -q "MAP_SHARED, $fd, 0)" "$d/trace.1000000"
    expect_eq "strace: 1000000 calls make no more system calls than 1" \
        "$(grep -vc '^+++\|^---' "$d/trace.1000000")" "$(grep -vc '^+++\|^---' "$d/trace.1")"
else
    skip "strace: no system call per call" "no strace"
fi
