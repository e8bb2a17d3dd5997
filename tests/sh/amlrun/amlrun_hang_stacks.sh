#!/usr/bin/env bash
# What a hang (--hang-timeout) and --timeout report, checked by content:
# real PyTorch DDP (gloo) with one rank stuck in a Python function while
# the others wait in all_reduce (the outlier, its file:line and function;
# the others' collective frame; the --hang-report JSON by keys and
# content); native ranks stuck in a C loop, blocked in read(2), stopped by
# SIGSTOP; per-rank progress (amldist.progress) naming the stalled rank
# though it prints; a rank that exits while the stacks are read; --timeout.
# amldist-test: slow (one of the longest: tests/run.sh starts it early)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
export OMP_NUM_THREADS=1

fresh() { rm -rf "$TEST_TMP/$1"; mkdir -p "$TEST_TMP/$1"; echo "$TEST_TMP/$1"; }
# line_of FILE TEXT: the number of FILE's first line holding TEXT
line_of() { grep -n -F -- "$2" "$1" | head -1 | cut -d: -f1; }

# --- DDP, rank 2 stuck in stuck_in_data_loader(), the others in all_reduce
DDP=$TOP/tests/amlrun/hang_ddp.py
d=$(fresh ddp)
"$AMLRUN" --hang-timeout 8 --hang-report "$d/report.json" --nproc-per-node 4 \
    "$DDP" 2 "$d" >"$d/out" 2>"$d/err"
expect_eq "DDP, rank 2 stuck: exit status 124" "$?" 124
grep -q 'likely cause: rank 2$' "$d/err" || sed 's/^/# stderr: /' "$d/err"
sleep_line=$(line_of "$DDP" "time.sleep(0.5)  # the line the report must name")
call_line=$(line_of "$DDP" "        stuck_in_data_loader()")
reduce_line=$(line_of "$DDP" "dist.all_reduce(t)  # the others wait here")
pid2=$(cat "$d/pid.2" 2>/dev/null)
check "DDP: the report names rank 2 alone as the likely cause" \
    grep -q "^amlrun: hang: no progress for 8 s; stacks of 4 ranks, 2 groups; likely cause: rank 2$" "$d/err"
check "DDP: rank 2 first, its host and pid, its file:line and function" \
    grep -q "^amlrun:   rank 2 (host $(hostname), pid $pid2): hang_ddp.py:$sleep_line stuck_in_data_loader < hang_ddp.py:$call_line train" "$d/err"
check "DDP: the others' group waits in all_reduce, called from train" \
    grep -qE "^amlrun:   ranks 0-1,3 \(3\): distributed_c10d.py:[0-9]+ all_reduce < (... < )?hang_ddp.py:$reduce_line train" "$d/err"
check "DDP: the outlier's line comes before the group's" \
    sh -c "grep -n '^amlrun:   rank' '$d/err' | head -1 | grep -q 'rank 2 '"
check "DDP: the report says where the JSON is" grep -q "^amlrun: the stacks are in $d/report.json$" "$d/err"
got=$("$TORCH_PY" - "$d/report.json" "$pid2" "$sleep_line" "$reduce_line" <<'PY' 2>&1
import json, sys
r = json.load(open(sys.argv[1]))
pid2, sleep_line, reduce_line = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
bad = []
def need(cond, what):
    if not cond:
        bad.append(what)
need(set(r) >= {"reason", "timeout_s", "ranks", "groups", "outliers"}, "top keys")
need(r["reason"] == "hang" and r["timeout_s"] == 8, "reason, timeout_s")
need(sorted(x["rank"] for x in r["ranks"]) == [0, 1, 2, 3], "4 ranks")
for x in r["ranks"]:
    need(set(x) >= {"rank", "local_rank", "node", "host", "pid", "last_progress_s", "threads"}, f"rank {x.get('rank')} keys")
    need(x["last_progress_s"] >= 8, f"rank {x['rank']} last_progress_s >= 8")
    for t in x["threads"]:
        need(set(t) >= {"python", "native"}, "thread keys")
        for f in t["python"] + t["native"]:
            need(set(f) == {"function", "file", "line"}, "frame keys")
r2 = [x for x in r["ranks"] if x["rank"] == 2][0]
need(r2["pid"] == pid2, "rank 2's pid")
main = r2["threads"][0]["python"]
need(main and main[0]["function"] == "stuck_in_data_loader" and main[0]["file"].endswith("/hang_ddp.py") and main[0]["line"] == sleep_line, "rank 2's innermost Python frame")
need(any(f["function"] for f in r2["threads"][0]["native"]), "rank 2's native frames")
need(r["outliers"] == [2], "outliers [2]")
need(r["groups"][0]["ranks"] == [2] and r["groups"][1]["ranks"] == [0, 1, 3], "groups [2], [0,1,3]")
fr = r["groups"][1]["frames"]
need(any(f["function"] == "all_reduce" for f in fr) and any(f["function"] == "train" and f["line"] == reduce_line for f in fr), "the group's collective frame")
print("ok" if not bad else "bad: " + ", ".join(bad))
PY
)
expect_eq "DDP: --hang-report JSON, by keys and content" "$got" ok

# --- native ranks: one stuck in a C loop, in read(2), stopped by SIGSTOP;
# the others wait in pause(2)
STUCK=$TEST_TMP/stuck
if cc -g -O0 -o "$STUCK" "$TOP/tests/amlrun/stuck.c"; then
    SRC=$TOP/tests/amlrun/stuck.c
    for mode in spin read stop; do
        d=$(fresh "native_$mode")
        "$AMLRUN" --hang-timeout 1 --hang-report "$d/r.json" --nproc-per-node 4 --no-python \
            "$STUCK" "$mode" 1 "$d" >"$d/out" 2>"$d/err"
        expect_eq "native, rank 1 $mode: 124" "$?" 124
        pid1=$(cat "$d/pid.1" 2>/dev/null)
        check "native, rank 1 $mode: named alone as the likely cause" \
            grep -q "stacks of 4 ranks, 2 groups; likely cause: rank 1$" "$d/err"
        check "native, $mode: the others wait in pause, from wait_for_peers" \
            grep -q "^amlrun:   ranks 0,2-3 (3): pause.c:[0-9]* pause < stuck.c:$(line_of "$SRC" "        pause();") wait_for_peers" "$d/err"
        case $mode in
        spin) want="stuck.c:$(line_of "$SRC" "        spins++;") spin_forever" ;;
        read) want="read.c:[0-9]* read < stuck.c:$(line_of "$SRC" "(void)read(p[0]") wait_for_input" ;;
        stop) want="" ;;
        esac
        check "native, rank 1 $mode: its line with host and pid${want:+, $want}" \
            grep -q "^amlrun:   rank 1 (host $(hostname), pid $pid1): $want" "$d/err"
    done
    check "native, stop: the stopped rank's own frames in the JSON" \
        "$TORCH_PY" -c 'import json, sys
r = json.load(open(sys.argv[1]))
x = [x for x in r["ranks"] if x["rank"] == 1][0]
sys.exit(0 if x["threads"] and x["threads"][0]["native"] else 1)' "$TEST_TMP/native_stop/r.json"
    # --- --timeout: the stacks first, then 124, whatever restarts are left
    d=$(fresh timeout)
    "$AMLRUN" --timeout 1 --max-restarts 2 --nproc-per-node 2 --no-python \
        "$STUCK" spin 0 "$d" >"$d/out" 2>"$d/err"
    expect_eq "--timeout 1: 124" "$?" 124
    check "--timeout: the merged stacks printed, reason timeout" \
        grep -q "^amlrun: timeout: .*stacks of 2 ranks, 2 groups" "$d/err"
    check "--timeout: rank 0's loop named" grep -q "stuck.c:[0-9]* spin_forever" "$d/err"
    check "--timeout: no restart" sh -c "! grep -q restarting '$d/err'"
else
    fail "native ranks: tests/amlrun/stuck.c builds with cc -g"
fi

# --- per rank (amldist.progress): rank 1 prints but makes no progress
d=$(fresh perrank)
cat >"$d/w.py" <<'PY'
import os, time
import amldist
rank = int(os.environ["RANK"])
for step in range(100000):
    if rank == 1 and step >= 3:
        print("rank 1 still loading", flush=True)  # lines, no progress
    else:
        amldist.progress(step)
    time.sleep(0.05)
PY
PYTHONPATH=$TOP/python "$AMLRUN" --hang-timeout 5 --hang-report "$d/r.json" --nproc-per-node 3 \
    "$d/w.py" >"$d/out" 2>"$d/err"
expect_eq "per rank: 124" "$?" 124
check "per rank: the stalled rank named though it prints" \
    grep -q "^amlrun: hang: rank 1 made no progress for [0-9.]* s (--hang-timeout 5): reading the stacks of the 3 ranks$" "$d/err"
check "per rank: rank 1 printed until the end" grep -q "rank 1 still loading" "$d/out"
check "per rank: the stalled rank is the outlier" \
    "$TORCH_PY" -c 'import json, sys; r = json.load(open(sys.argv[1])); sys.exit(0 if r["outliers"] == [1] else 1)' "$d/r.json"

# --- a rank that exits while its stack is read: a handler of the real-time
# signals (amlrun asks for Python frames with one) installed by the raw
# system call in a worker under a seccomp filter of its own (an allow-all
# one), where amlrun does not read the kernel's handler (a filter the
# worker added could kill it for that call) and trusts its hook and guard,
# which do not see it:
# libc's _exit itself, so the rank exits at once with the signal's number
# as its status
# An allow-all seccomp filter, put on the process (allow_all()) or on a
# command it then runs (the module run as a program): as in a container.
cat >"$TEST_TMP/seccomp_allow.py" <<'PY'
import ctypes, os, sys
class Filter(ctypes.Structure):  # struct sock_filter: return ALLOW
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte),
                ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]
class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]
def allow_all():
    libc = ctypes.CDLL(None)
    allow = Filter(0x06, 0, 0, 0x7fff0000)
    PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
    assert libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
    assert libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER,
                      ctypes.byref(Prog(1, ctypes.pointer(allow))), 0, 0) == 0
if __name__ == "__main__":
    allow_all()
    os.execv(sys.argv[1], sys.argv[1:])
PY
d=$(fresh exits)
cat >"$d/w.py" <<'PY'
import ctypes, os, signal, sys, time
if os.environ["RANK"] == "1":
    import seccomp_allow
    seccomp_allow.allow_all()
    libc = ctypes.CDLL(None, use_errno=True)
    exit_now = ctypes.cast(libc._exit, ctypes.c_void_p).value
    class KSigaction(ctypes.Structure):  # the kernel's, x86-64
        _fields_ = [("handler", ctypes.c_void_p), ("flags", ctypes.c_ulong),
                    ("restorer", ctypes.c_void_p), ("mask", ctypes.c_ulong)]
    SA_RESTORER, SYS_rt_sigaction = 0x04000000, 13
    act = KSigaction(exit_now, SA_RESTORER, exit_now, 0)  # never returns
    for s in range(signal.SIGRTMIN, signal.SIGRTMAX + 1):
        assert libc.syscall(SYS_rt_sigaction, s, ctypes.byref(act), None, 8) == 0
open(sys.argv[1] + "/ready." + os.environ["RANK"], "w").close()
while True:
    time.sleep(1)
PY
PYTHONPATH=$TEST_TMP "$AMLRUN" -v --hang-timeout 5 --hang-report "$d/r.json" --nproc-per-node 3 "$d/w.py" "$d" \
    >"$d/out" 2>"$d/err"
expect_eq "a rank exits while the stacks are read: the job still ends (124)" "$?" 124
check "... the report is printed" grep -q "^amlrun: hang: no progress for 5 s; stacks of 3 ranks" "$d/err"
check "... rank 1 exited then, by its own hand (the signal's number)" \
    grep -q "^amlrun: rank 1 (local 1, pid [0-9]*): exited with status [3-6][0-9]$" "$d/err"
check "... the JSON says why its Python frames are missing" \
    "$TORCH_PY" -c 'import json, sys
r = json.load(open(sys.argv[1]))
x = [x for x in r["ranks"] if x["rank"] == 1][0]
sys.exit(0 if x.get("error") else 1)' "$d/r.json"

# own_handler_json REPORT K=WHY...: rank 0 gives its Python frames (in
# stuck_here), each rank K only native ones, its error holding WHY.
own_handler_json() {
    "$TORCH_PY" - "$@" <<'PY' 2>&1
import json, sys
r = json.load(open(sys.argv[1]))
bad = []
rank = {x["rank"]: x for x in r["ranks"]}
def main(x):
    return x["threads"][0] if x["threads"] else {"python": [], "native": []}
p0 = main(rank[0])["python"]
if not (p0 and p0[0]["function"] == "stuck_here") or rank[0].get("error"):
    bad.append("rank 0's Python frames")
for arg in sys.argv[2:]:
    k, why = arg.split("=", 1)
    k = int(k)
    e = rank[k].get("error") or ""
    if why not in e:
        bad.append(f"rank {k}'s error: {e!r}")
    if main(rank[k])["python"] or not any(f["function"] for f in main(rank[k])["native"]):
        bad.append(f"rank {k}: native frames only")
print("ok" if not bad else "bad: " + ", ".join(bad))
PY
}

# --- handlers of the program's own on amlrun's signal (SIGRTMAX - 6), set
# from C through ctypes (signal and sigaction, found in the process's
# scope as a C extension's calls are) and with signal.signal: amlrun's
# guard and hook let go of the channel, the report says why each rank has
# no Python frames and gives its native ones, no rank waits for a dump
# that cannot come, and no handler ever runs (each would write its file);
# rank 0, a plain worker, gives its Python frames
d=$(fresh handlers)
cat >"$d/w.py" <<'PY'
import ctypes, os, signal, sys, time
rank, out = int(os.environ["RANK"]), sys.argv[1]
SIG = signal.SIGRTMAX - 6
libc = ctypes.CDLL(None)
HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int)
@HANDLER
def in_c(sig):
    os.close(os.open(out + "/called." + str(rank), os.O_CREAT | os.O_WRONLY))
def in_python(sig, frame):
    in_c(sig)
class SA(ctypes.Structure):  # glibc's struct sigaction, x86-64
    _fields_ = [("handler", HANDLER), ("mask", ctypes.c_ulong * 16),
                ("flags", ctypes.c_int), ("restorer", ctypes.c_void_p)]
if rank == 1:
    libc.signal.argtypes = [ctypes.c_int, HANDLER]
    libc.signal(SIG, in_c)
elif rank == 2:
    sa = SA(in_c)
    assert libc.sigaction(SIG, ctypes.byref(sa), None) == 0
elif rank == 3:
    signal.signal(SIG, in_python)
def stuck_here():
    while True:
        time.sleep(0.05)
stuck_here()
PY
"$AMLRUN" --hang-timeout 3 --hang-report "$d/r.json" --nproc-per-node 4 "$d/w.py" "$d" \
    >"$d/out" 2>"$d/err"
expect_eq "own handlers: the job ends as a hang (124)" "$?" 124
check "own handlers: no handler of the program ran" \
    sh -c "! ls '$d'/called.* >/dev/null 2>&1"
check "own handlers: no rank waited for a dump in vain" \
    sh -c "! grep -q 'no answer from its faulthandler' '$d/err' '$d/r.json'"
got=$(own_handler_json "$d/r.json" "1=the program handles signal" \
    "2=the program handles signal" "3=the program handles signal")
expect_eq "own handlers: rank 0's Python frames, the others' native ones and why" "$got" ok
check "own handlers: the report's lines name the reason, under the ranks' group" \
    grep -q "^amlrun:     ranks 1-3: no Python frames: the program handles signal [0-9]* (amlrun's) itself" "$d/err"
grep -q "^amlrun:     ranks 1-3" "$d/err" || sed 's/^/# stderr: /' "$d/err"

# --- handlers set past the guard, which no interposed symbol sees: libc's
# own handle (ctypes.CDLL("libc.so.6"): signal, sigaction), the raw system
# call, a library loaded with RTLD_DEEPBIND (its sigaction binds to libc's
# first); and the signal blocked in every thread, taken by sigwait or a
# signalfd.  amlrun reads each worker's handler while it holds it for its
# native frames and the threads' masks and waits: no handler of the
# program runs (each would write its file), no rank dies of the signal, the
# report and --stacks give native frames and say why; rank 0, a plain
# worker, gives its Python frames
d=$(fresh past_guard)
cat >"$d/deep.c" <<'C'
#include <signal.h>
#include <string.h>
int install(int sig, void (*h)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    return sigaction(sig, &sa, NULL);
}
C
cc -shared -fPIC -o "$d/deep.so" "$d/deep.c" || fail "past the guard: a DEEPBIND library builds"
cat >"$d/w.py" <<'PY'
import ctypes, os, signal, sys, time
rank, out = int(os.environ["RANK"]), sys.argv[1]
SIG = signal.SIGRTMAX - 6
HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int)
@HANDLER
def in_c(sig):
    os.close(os.open(out + "/called." + str(rank), os.O_CREAT | os.O_WRONLY))
class SA(ctypes.Structure):  # glibc's struct sigaction, x86-64
    _fields_ = [("handler", HANDLER), ("mask", ctypes.c_ulong * 16),
                ("flags", ctypes.c_int), ("restorer", ctypes.c_void_p)]
class KSA(ctypes.Structure):  # the kernel's, x86-64
    _fields_ = [("handler", HANDLER), ("flags", ctypes.c_ulong),
                ("restorer", ctypes.c_void_p), ("mask", ctypes.c_ulong)]
own = ctypes.CDLL("libc.so.6")  # libc's own handle, not the process's scope
if rank == 1:
    own.signal.argtypes = [ctypes.c_int, HANDLER]
    own.signal(SIG, in_c)
elif rank == 2:
    assert own.sigaction(SIG, ctypes.byref(SA(in_c)), None) == 0
elif rank == 3:
    SYS_rt_sigaction = 13
    assert own.syscall(SYS_rt_sigaction, SIG, ctypes.byref(KSA(in_c)), None, 8) == 0
elif rank == 4:
    lib = ctypes.CDLL(out + "/deep.so", mode=os.RTLD_DEEPBIND | os.RTLD_NOW)
    lib.install.argtypes = [ctypes.c_int, HANDLER]
    assert lib.install(SIG, in_c) == 0
elif rank >= 5:
    signal.pthread_sigmask(signal.SIG_BLOCK, [SIG])
    if rank == 6:
        sfd = own.signalfd(-1, (ctypes.c_ulong * 16)(1 << (SIG - 1)), 0)
        assert sfd >= 0
open(out + "/ready." + str(rank), "w").close()
def stuck_here():
    while True:
        if rank == 5:
            signal.sigwait([SIG])
            in_c(SIG)
        elif rank == 6:
            os.read(sfd, 128)
            in_c(SIG)
        else:
            time.sleep(0.05)
stuck_here()
PY
"$AMLRUN" --hang-timeout 3 --hang-report "$d/r.json" --nproc-per-node 7 "$d/w.py" "$d" \
    >"$d/out" 2>"$d/err"
expect_eq "past the guard: the job ends as a hang (124)" "$?" 124
check "past the guard: no handler of the program ran" \
    sh -c "! ls '$d'/called.* >/dev/null 2>&1"
check "past the guard: no rank died of the signal (none exited before the stop)" \
    sh -c "! grep -q 'exited with\\|killed by' '$d/err'"
expect_eq "past the guard: rank 0's Python frames, the others' native ones and why" \
    "$(own_handler_json "$d/r.json" "1=past amlrun's guard" "2=past amlrun's guard" \
        "3=past amlrun's guard" "4=past amlrun's guard" "5=blocks signal" "6=blocks signal")" ok
check "past the guard: the report's line for ranks 1-4" \
    grep -q "^amlrun:     ranks 1-4: no Python frames: the program handles signal [0-9]* (amlrun's) itself, set pas" "$d/err"
for k in 5 6; do
    check "past the guard: the report's line for rank $k (a group of its own)" \
        grep -q "^amlrun:     rank $k: no Python frames: every thread of the program blocks signal [0-9]*" "$d/err"
done
grep -q "^amlrun:     rank 6" "$d/err" || sed 's/^/# stderr: /' "$d/err"

# The same asked with --stacks of the running job, twice, amlrun and the
# job under a seccomp filter of amlrun's (as in a container: the workers
# inherit it, and amlrun reads their handlers through it): it stops
# nothing, and no handler runs.
rm -f "$d"/ready.*
"$TORCH_PY" "$TEST_TMP/seccomp_allow.py" "$AMLRUN" --nproc-per-node 7 "$d/w.py" "$d" \
    >"$d/out2" 2>"$d/err2" &
job=$!
if wait_for 7 60 "$d" 'ready\.'; then
    "$AMLRUN" --stacks "$job" >"$d/k1.out" 2>&1
    expect_eq "past the guard, --stacks: exit 0" "$?" 0
    "$AMLRUN" --stacks "$job" >"$d/k2.out" 2>&1
    check "past the guard, --stacks: ranks 1-4 said" \
        grep -q "^amlrun:     ranks 1-4: no Python frames: the program handles signal [0-9]* (amlrun's) itself, set pas" "$d/k2.out"
    for k in 5 6; do
        check "past the guard, --stacks: rank $k said" \
            grep -q "^amlrun:     rank $k: no Python frames: every thread of the program blocks signal [0-9]*" "$d/k2.out"
    done
    check "past the guard, --stacks: rank 0's Python frames" grep -q "w.py:[0-9]* stuck_here" "$d/k2.out"
    grep -q "^amlrun:     rank 6" "$d/k2.out" || sed 's/^/# --stacks: /' "$d/k2.out"
    check "past the guard, --stacks: no handler of the program ran" \
        sh -c "! ls '$d'/called.* >/dev/null 2>&1"
    check "past the guard, --stacks: the job still runs" kill -0 "$job"
else
    fail "past the guard: the job of 7 ranks started"
fi
kill "$job" 2>/dev/null
wait "$job" 2>/dev/null
check "past the guard, --stacks: no rank died of the signal" \
    sh -c "! grep -q 'exited with status [0-9]* after\\|killed by signal 58' '$d/err2'"
