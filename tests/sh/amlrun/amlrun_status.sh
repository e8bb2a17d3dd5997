#!/usr/bin/env bash
# amlrun --status and --stacks against real running jobs: found by pid, by
# run id and alone; two jobs named, none said; the status's ranks are the
# workers (pids from the workers themselves), as a table and as JSON; the
# socket's directory is private (0700), another user (runuser) learns
# nothing and a peer of another uid that reaches the socket anyway gets not
# a byte (SO_PEERCRED); the workers do not inherit the socket; it is gone
# after the job; a dead amlrun's socket is cleaned; a client that stalls
# does not hold up the next; answers during a restart; 64 ranks; --stacks
# stops nothing; each rank's progress step and lag; two nodes on their
# control plane, each answering.  Every job runs under
# a private XDG_RUNTIME_DIR, so that other tests' jobs are not in the
# lists.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
d=$TEST_TMP/status
mkdir -p "$d"
export XDG_RUNTIME_DIR=$TEST_TMP/xdg
mkdir -m 0700 "$XDG_RUNTIME_DIR"
sockdir=$XDG_RUNTIME_DIR/amlrun

# The worker: says where it is (its pid in ready.<attempt>.<rank>), writes a
# line, then waits in a named function until DIR/stop appears; with
# FAIL_FIRST, rank 0 of the first attempt exits 3 once DIR/fail appears,
# and the next attempt's workers take 1.5 s before they say where they are.
cat >"$d/worker.py" <<'EOF'
import os, sys, time
d = sys.argv[1]
def wait_here(path):
    # Only C calls below it (no os.path frame): every rank's innermost
    # Python frame is this one, whenever its stack is read.
    while True:
        try:
            os.stat(path)
            return
        except FileNotFoundError:
            time.sleep(0.05)
rank = os.environ["RANK"]
attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
print("rank %s up" % rank, flush=True)
if os.environ.get("FAIL_FIRST") and attempt != "0":
    time.sleep(1.5)  # a window in which --status is asked after the restart
with open(os.path.join(d, "ready.%s.%s.tmp" % (attempt, rank)), "w") as f:
    f.write(str(os.getpid()))
os.rename(os.path.join(d, "ready.%s.%s.tmp" % (attempt, rank)),
          os.path.join(d, "ready.%s.%s" % (attempt, rank)))
if os.environ.get("FAIL_FIRST") and attempt == "0" and rank == "0":
    wait_here(os.path.join(d, "fail"))
    sys.exit(3)
wait_here(os.path.join(d, "stop"))
EOF

# start_job NAME NPROC [ENV...]: a job with run id st-NAME (and the
# options in the array extra) whose workers report in $d/NAME; sets
# pid_NAME.
extra=()
start_job() {
    local name=$1 n=$2; shift 2
    mkdir -p "$d/$name"
    env "$@" "$AMLRUN" --nproc-per-node "$n" --run-id "st-$name" -v "${extra[@]}" \
        "$d/worker.py" "$d/$name" >"$d/$name.out" 2>"$d/$name.err" &
    printf -v "pid_$name" %s "$!"
}

# end_job NAME: let its workers finish; its exit status in rc_NAME.
end_job() {
    local name=$1 p
    p=pid_$name
    touch "$d/$name/stop"
    wait "${!p}"
    printf -v "rc_$name" %s "$?"
}

# worker_pids NAME ATTEMPT N: "rank pid" lines from the workers' files
worker_pids() {
    for ((r = 0; r < $3; r++)); do echo "$r $(cat "$d/$1/ready.$2.$r")"; done
}

# json_ranks: "rank pid" of each rank of a --status=json on stdin
json_ranks() {
    "$TORCH_PY" -c 'import json,sys
j = json.load(sys.stdin)
for r in j["ranks"]: print(r["rank"], r["pid"])'
}

# table_ranks: "rank pid" of each rank row of --status's table on stdin
table_ranks() {
    awk '/^RANK /{t=1; next} t && NF >= 4 && $1 ~ /^[0-9]+$/ {print $1, $4} /^$/{t=0}'
}

# --- no job at all
"$AMLRUN" --status >"$d/none.out" 2>"$d/none.err"
expect_eq "--status with no job: exit 1" "$?" 1
check "and it says there is none" grep -q "no running job of yours on this machine" "$d/none.err"
"$AMLRUN" --stacks >/dev/null 2>"$d/none.err"
expect_eq "--stacks with no job: exit 1" "$?" 1
"$AMLRUN" --status 424242 >/dev/null 2>"$d/none.err"
expect_eq "--status of a pid that is no job: exit 1" "$?" 1

# --- bad input
"$AMLRUN" --status a b >/dev/null 2>&1
expect_eq "--status with two jobs named: usage error (2)" "$?" 2
"$AMLRUN" --status --stacks >/dev/null 2>&1
expect_eq "--status with --stacks: usage error (2)" "$?" 2
"$AMLRUN" --status=xml >/dev/null 2>&1
expect_eq "--status=xml: usage error (2)" "$?" 2
"$AMLRUN" --status '' >/dev/null 2>&1
expect_eq "--status '': usage error (2)" "$?" 2

# --- one job of 4 ranks
start_job a 4
if ! wait_for 4 60 "$d/a" 'ready\.0\.[0-9]*$'; then
    fail "a job of 4 ranks did not start"; cat "$d/a.err" | sed 's/^/# /'
    kill "$pid_a"; wait "$pid_a"; exit 0
fi
want=$(worker_pids a 0 4)
check "the supervisor said where its socket is (-v)" grep -q "^amlrun: --status socket: $sockdir/st-a\.$pid_a\.sock\$" "$d/a.err"
expect_eq "the socket's directory is the user's own, mode 0700" "$(stat -c '%a %u' "$sockdir")" "700 0"
expect_eq "the socket is named <run id>.<pid>.sock, mode 0600" "$(stat -c '%a %F' "$sockdir/st-a.$pid_a.sock")" "600 socket"

"$AMLRUN" --status >"$d/s1.out" 2>"$d/s1.err"
expect_eq "--status with the only job: exit 0" "$?" 0
expect_eq "--status: one row per rank, each with its worker's pid" "$(table_ranks <"$d/s1.out")" "$want"
check "--status: the job's run id, amlrun pid and command" \
    grep -q "^job st-a: amlrun pid $pid_a, 4 ranks on 1 node, up [0-9.]* s, restarts 0 (at most 0)\$" "$d/s1.out"
check "--status: the node's host, address and state" \
    grep -qE "^0 +$(hostname) +127\.0\.0\.1 +running +$pid_a " "$d/s1.out"
check "--status: each rank's process state and its last output line's age" \
    sh -c "awk '/^RANK /{t=1;next} t && \$1 ~ /^[0-9]+\$/' '$d/s1.out' | grep -cE ' (sleeping|running) .* [0-9.]+s +- +- +-\$' | grep -qx 4"
"$AMLRUN" --status "$pid_a" >"$d/s2.out" 2>&1
expect_eq "--status PID: exit 0" "$?" 0
expect_eq "--status PID: the same ranks" "$(table_ranks <"$d/s2.out")" "$want"
"$AMLRUN" --status=json st-a >"$d/s3.json" 2>&1
expect_eq "--status=json RUN_ID: exit 0" "$?" 0
expect_eq "--status=json RUN_ID: every rank with its worker's pid" "$(json_ranks <"$d/s3.json")" "$want"
check "--status=json: the node's host and state, rss and cpu of each rank" "$TORCH_PY" -c "
import json, socket, sys
j = json.load(open('$d/s3.json'))
n = j['nodes'][0]
assert j['run_id'] == 'st-a' and j['pid'] == $pid_a, j
assert n['host'] == socket.gethostname() and n['state'] == 'running', n
assert n['restarts'] == 0 and n['uptime_s'] > 0, n
for r in j['ranks']:
    assert r['rss_bytes'] > 1 << 20 and 0 <= r['cpu_percent'] <= 200, r
    assert r['node'] == 0 and r['local_rank'] == r['rank'], r
    assert r['output_age_s'] is not None and r['output_age_s'] >= 0, r
"

# The workers do not inherit the socket; amlrun holds it (so the check sees it).
inode=$(awk -v p="$sockdir/st-a.$pid_a.sock" '$8 == p {print $7}' /proc/net/unix | head -n 1)
check "the listening socket is in /proc/net/unix" test -n "$inode"
held=$(ls -l "/proc/$pid_a/fd" 2>/dev/null | grep -c "socket:\[$inode\]")
expect_eq "amlrun holds its socket" "$held" 1
inherited=0
for p in $(cut -d' ' -f2 <<<"$want"); do
    n=$(ls -l "/proc/$p/fd" 2>/dev/null | grep -c "socket:\[$inode\]")
    inherited=$((inherited + n))
done
expect_eq "no worker inherits the socket (ls -l /proc/PID/fd)" "$inherited" 0

# A client that connects and says nothing does not hold up the next one.
"$TORCH_PY" -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
open(sys.argv[2], "w").close()
time.sleep(60)' "$sockdir/st-a.$pid_a.sock" "$d/stalled" &
staller=$!
wait_for 1 20 "$d" stalled
"$AMLRUN" --status st-a >"$d/s4.out" 2>&1
expect_eq "a silent client connected: --status still answers" "$?" 0
expect_eq "with every rank" "$(table_ranks <"$d/s4.out" | wc -l)" 4
kill "$staller"; wait "$staller" 2>/dev/null

# --stacks: every rank in the named function of its Python frames; it
# stops nothing.
"$AMLRUN" --stacks st-a >"$d/k1.out" 2>"$d/k1.err"
expect_eq "--stacks RUN_ID: exit 0" "$?" 0
check "--stacks: one group, the 4 ranks at worker.py's wait_here" \
    grep -qE '^amlrun:   ranks 0-3 \(4\): worker\.py:[0-9]+ wait_here < worker\.py:[0-9]+ <module>' "$d/k1.out"
sed 's/^/# /' "$d/k1.out" "$d/k1.err"
check "--stacks: 4 ranks in 1 group, all at the same place" \
    grep -qE "^amlrun: .*stacks of 4 ranks.* 1 group.*same place" "$d/k1.out"
"$AMLRUN" --stacks "$pid_a" >"$d/k2.out" 2>&1
expect_eq "--stacks PID: exit 0" "$?" 0
check "after --stacks the job still runs" kill -0 "$pid_a"
"$AMLRUN" --status st-a >"$d/s5.out" 2>&1
expect_eq "after --stacks every rank is still there" "$(table_ranks <"$d/s5.out")" "$want"

# --- another user learns nothing
quser=amlrun-qtest
made_user=
if ! id "$quser" >/dev/null 2>&1 && have useradd; then
    useradd -M -r -s /usr/sbin/nologin "$quser" 2>/dev/null && made_user=1
fi
if id "$quser" >/dev/null 2>&1 && have runuser; then
    quid=$(id -u "$quser")
    # Root's socket where another user could look for it (no
    # XDG_RUNTIME_DIR): /tmp/amlrun-0.
    start_job b 2 -u XDG_RUNTIME_DIR
    if wait_for 2 60 "$d/b" 'ready\.0\.[0-9]*$'; then
        bsock=/tmp/amlrun-0/st-b.$pid_b.sock
        check "without XDG_RUNTIME_DIR the socket is in /tmp/amlrun-0" test -S "$bsock"
        expect_eq "/tmp/amlrun-0 is 0700, root's" "$(stat -c '%a %u' /tmp/amlrun-0)" "700 0"
        for args in "--status" "--status $pid_b" "--status st-b" "--stacks $pid_b" "--status=json"; do
            # shellcheck disable=SC2086
            out=$(cd / && runuser -u "$quser" -- env -u XDG_RUNTIME_DIR "$AMLRUN" $args 2>&1)
            rc=$?
            expect_eq "another user: amlrun $args: exit 1" "$rc" 1
            # What it was told, less the words it gave itself.
            job=${args#* }
            [ "$job" = "$args" ] || out=${out//"no job $job:"/}
            case $out in
            *st-b*|*"$pid_b"*|*"$(cat "$d/b/ready.0.0")"*|*worker.py*)
                fail "another user: amlrun $args learns nothing of the job"; diag "$out" ;;
            *) ok "another user: amlrun $args learns nothing of the job" ;;
            esac
        done
        check "another user cannot list the directory" \
            sh -c "! runuser -u '$quser' -- ls /tmp/amlrun-0 >/dev/null 2>&1"
        # A peer of another uid that reaches the socket anyway (its mode
        # opened here on purpose, the path opened by root before dropping
        # to the user): SO_PEERCRED closes it before a byte.
        chmod 0666 "$bsock"
        got=$("$TORCH_PY" -c '
import os, socket, sys
fd = os.open(sys.argv[1], os.O_PATH)
uid = int(sys.argv[2])
os.setgroups([]); os.setgid(uid); os.setuid(uid)
s = socket.socket(socket.AF_UNIX); s.settimeout(20)
s.connect("/proc/self/fd/%d" % fd)
try:
    s.sendall(b"status\n")
    print(len(s.recv(65536)))
except (ConnectionResetError, BrokenPipeError):
    print(0)' "$bsock" "$quid" 2>&1)
        chmod 0600 "$bsock"
        expect_eq "a peer of another uid that reaches the socket gets 0 bytes" "$got" 0
        "$AMLRUN" --status "$pid_b" >"$d/b1.out" 2>&1
        expect_eq "root's own --status PID of that job still answers" "$?" 0
        end_job b
        expect_eq "that job then ends normally (0)" "$rc_b" 0
        check "and its socket is gone" test ! -e "$bsock"
    else
        fail "the job for the other-user cases did not start"
        kill "$pid_b"; wait "$pid_b"
    fi
    # The user's own job: found by that user (in /tmp/amlrun-<uid>, made
    # by its amlrun), and by root, by pid.
    (cd / && exec runuser -u "$quser" -- env -u XDG_RUNTIME_DIR "$AMLRUN" --nproc-per-node 2 \
        --run-id "st-u-$$" sh -c 'while :; do sleep 0.1; done') >/dev/null 2>&1 &
    ujob=$!
    upid=
    deadline=$((SECONDS + 60))
    until [ -n "$upid" ] || [ "$SECONDS" -ge "$deadline" ]; do
        upid=$(ls "/tmp/amlrun-$quid" 2>/dev/null | sed -n "s/^st-u-$$\.\([0-9]*\)\.sock\$/\1/p")
        sleep 0.1
    done
    if [ -n "$upid" ]; then
        expect_eq "the user's amlrun made its own directory, 0700" \
            "$(stat -c '%a %u' "/tmp/amlrun-$quid")" "700 $quid"
        out=$(cd / && runuser -u "$quser" -- env -u XDG_RUNTIME_DIR "$AMLRUN" --status 2>&1)
        expect_eq "the user's --status finds its own job (0)" "$?" 0
        check "with its 2 ranks" test "$(table_ranks <<<"$out" | wc -l)" = 2
        "$AMLRUN" --status "$upid" >"$d/u.out" 2>&1
        expect_eq "root's --status PID of the user's job (0)" "$?" 0
        check "root sees the user's job and its 2 ranks" sh -c \
            "grep -q '^job st-u-$$: amlrun pid $upid' '$d/u.out' && test \$(awk '/^RANK /{t=1;next} t && \$1 ~ /^[0-9]+\$/' '$d/u.out' | wc -l) = 2"
        kill -TERM "$upid"
        deadline=$((SECONDS + 60))
        while kill -0 "$upid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
        check "the user's socket is gone after its job" test ! -e "/tmp/amlrun-$quid/st-u-$$.$upid.sock"
    else
        fail "the user's own job did not start"
        kill "$ujob"
    fi
    wait "$ujob"
    if [ -n "$made_user" ]; then
        userdel "$quser" 2>/dev/null
        rm -rf "/tmp/amlrun-$quid" # its amlrun's, left for nobody
    fi
else
    skip "another user learns nothing" "no user $quser and no useradd/runuser"
fi

# --- two jobs
start_job c 2
if wait_for 2 60 "$d/c" 'ready\.0\.[0-9]*$'; then
    "$AMLRUN" --status >"$d/two.out" 2>"$d/two.err"
    expect_eq "--status with two jobs and none named: exit 1" "$?" 1
    check "it names both jobs: run id, pid, command" sh -c \
        "grep -q 'run id st-a, amlrun pid $pid_a, started .*worker.py' '$d/two.err' &&
         grep -q 'run id st-c, amlrun pid $pid_c, started .*worker.py' '$d/two.err'"
    check "and prints no status" test ! -s "$d/two.out"
    "$AMLRUN" --status st-nope >/dev/null 2>"$d/nope.err"
    expect_eq "--status of a run id no job has: exit 1" "$?" 1
    check "it lists the jobs there are" sh -c \
        "grep -q '^amlrun: no job st-nope; the jobs of yours' '$d/nope.err' && grep -q 'st-a' '$d/nope.err' && grep -q 'st-c' '$d/nope.err'"
    "$AMLRUN" --status st-c >"$d/c1.out" 2>&1
    expect_eq "--status RUN_ID picks one of the two" "$(table_ranks <"$d/c1.out")" "$(worker_pids c 0 2)"
    # Two jobs with one run id: ambiguous by it, not by pid.
    mkdir -p "$d/c2"
    "$AMLRUN" --nproc-per-node 1 --run-id st-c "$d/worker.py" "$d/c2" >/dev/null 2>&1 &
    pid_c2=$!
    if wait_for 1 60 "$d/c2" 'ready\.0\.0$'; then
        "$AMLRUN" --status st-c >/dev/null 2>"$d/amb.err"
        expect_eq "--status of a run id two jobs share: exit 1" "$?" 1
        check "it says so and lists the jobs" sh -c \
            "grep -q '^amlrun: st-c names 2 jobs' '$d/amb.err' && grep -q 'pid $pid_c2' '$d/amb.err'"
        "$AMLRUN" --status "$pid_c2" >"$d/c2.out" 2>&1
        expect_eq "the pid tells them apart" "$(table_ranks <"$d/c2.out")" "$(worker_pids c2 0 1)"
    else
        fail "the third job did not start"
    fi
    touch "$d/c2/stop"; wait "$pid_c2"
    end_job c
    expect_eq "the second job ends normally" "$rc_c" 0
else
    fail "the second job did not start"
    kill "$pid_c"; wait "$pid_c"
fi

end_job a
expect_eq "the job asked about ends normally (0)" "$rc_a" 0
check "its socket is gone after the job" test ! -e "$sockdir/st-a.$pid_a.sock"
"$AMLRUN" --status st-a >/dev/null 2>&1
expect_eq "--status of the ended job: exit 1" "$?" 1

# --- a socket whose amlrun died is cleaned, and not listed
# (no pid is above pid_max's ceiling, 4194304)
"$TORCH_PY" -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$sockdir/st-dead.999999999.sock"
dead=st-dead.999999999.sock
check "a socket of a dead amlrun is there to be found" test -S "$sockdir/$dead"
"$AMLRUN" --status >/dev/null 2>"$d/dead.err"
expect_eq "a dead amlrun's socket is no job: exit 1" "$?" 1
check "it is not listed as a job" sh -c "! grep -q 'st-dead' '$d/dead.err'"
check "and it was removed" test ! -e "$sockdir/$dead"

# --- directories refused: the job runs, its socket in /tmp/amlrun-<uid>, and says why
bad=$TEST_TMP/xdg-open
mkdir -m 0700 "$bad"; mkdir -m 0755 "$bad/amlrun"
out=$(XDG_RUNTIME_DIR=$bad "$AMLRUN" -v --nproc-per-node 1 true 2>&1)
expect_eq "a socket directory open to others: the job still runs (0)" "$?" 0
check "and it says why that directory is not used, and which one is" grep -q "warning: $bad/amlrun has mode 0755.*--status socket is in /tmp/amlrun-0" <<<"$out"
check "nothing was made in it" test -z "$(ls "$bad/amlrun")"
XDG_RUNTIME_DIR=$bad "$AMLRUN" --status "st-none-$$" >/dev/null 2>"$d/bad.err"
expect_eq "--status refuses that directory too (1)" "$?" 1
check "naming its mode" grep -q "has mode 0755" "$d/bad.err"
link=$TEST_TMP/xdg-link
mkdir -m 0700 "$link" "$TEST_TMP/elsewhere"
ln -s "$TEST_TMP/elsewhere" "$link/amlrun"
out=$(XDG_RUNTIME_DIR=$link "$AMLRUN" -v --nproc-per-node 1 true 2>&1)
expect_eq "a socket directory that is a symbolic link: the job still runs (0)" "$?" 0
check "and it says it is a link, not used" grep -q "warning: .*is a symbolic link.*--status socket is in /tmp/amlrun-0" <<<"$out"

# --- during a restart: the status answers in between, and counts it
extra=(--max-restarts 1)
start_job r 4 FAIL_FIRST=1
extra=()
if wait_for 4 60 "$d/r" 'ready\.0\.[0-9]*$'; then
    "$AMLRUN" --status st-r >"$d/r0.out" 2>&1
    check "before the failure: restarts 0" grep -q "restarts 0 (at most 1)" "$d/r0.out"
    (
        while [ ! -e "$d/r/ready.1.3" ] && kill -0 "$pid_r" 2>/dev/null; do
            "$AMLRUN" --status st-r >/dev/null 2>>"$d/r-loop.err"
            echo $? >>"$d/r-loop.rc"
        done
    ) &
    loop=$!
    touch "$d/r/fail"
    wait_for 4 60 "$d/r" 'ready\.1\.[0-9]*$'
    wait "$loop"
    check "--status was asked during the restart, more than once" \
        test "$(wc -l <"$d/r-loop.rc")" -ge 2
    expect_eq "every --status during the restart answered (0)" "$(sort -u "$d/r-loop.rc")" 0
    "$AMLRUN" --stacks st-r >"$d/rk.out" 2>&1
    expect_eq "--stacks after the restart: the new workers' stacks (0)" "$?" 0
    "$AMLRUN" --status=json st-r >"$d/r1.json" 2>&1
    expect_eq "after the restart: the new workers" "$(json_ranks <"$d/r1.json")" "$(worker_pids r 1 4)"
    check "and restarts 1" "$TORCH_PY" -c "
import json; j = json.load(open('$d/r1.json')); assert j['nodes'][0]['restarts'] == 1, j"
    end_job r
    expect_eq "the restarted job ends normally (0)" "$rc_r" 0
else
    fail "the restart job did not start"
    kill "$pid_r"; wait "$pid_r"
fi

# --- 64 ranks on one node
start_job big 64
if wait_for 64 180 "$d/big" 'ready\.0\.[0-9]*$'; then
    "$AMLRUN" --status st-big >"$d/big.out" 2>&1
    expect_eq "64 ranks: --status answers (0)" "$?" 0
    expect_eq "64 ranks: --status lists each one with its pid" "$(table_ranks <"$d/big.out")" "$(worker_pids big 0 64)"
    start=$SECONDS
    timeout 120 "$AMLRUN" --stacks st-big >"$d/bigk.out" 2>"$d/bigk.err"
    rc=$?
    diag "64 ranks: --stacks rc $rc in $((SECONDS - start)) s"
    expect_eq "64 ranks: --stacks answers within 120 s (0)" "$rc" 0
    check "64 ranks: every one at wait_here" \
        grep -qE '^amlrun:   ranks 0-63 \(64\): worker\.py:[0-9]+ wait_here' "$d/bigk.out"
    sed 's/^/# /' "$d/bigk.out" "$d/bigk.err" | head -5
    "$AMLRUN" --status st-big >"$d/big2.out" 2>&1
    expect_eq "64 ranks: after --stacks every rank still runs, the same pids" \
        "$(table_ranks <"$d/big2.out")" "$(worker_pids big 0 64)"
    end_job big
    expect_eq "64 ranks: the job then ends normally (0)" "$rc_big" 0
else
    fail "64 ranks did not start"
    kill "$pid_big"; wait "$pid_big"
fi

# --- progress: every rank's step, and rank 2's lag (it is 40 ms slower at
# each step: consistently last)
# (400 steps, rank 2's 24 s, so that the job still runs when asked on a
# loaded machine; once asked, the steps end: PROGRESS_STOP; the ranks start
# their steps together: PROGRESS_START)
mkdir "$d/prog.start"
PROGRESS_START=$d/prog.start PROGRESS_STOP=$d/prog.stop PYTHONPATH=$TOP/python${PYTHONPATH:+:$PYTHONPATH} "$AMLRUN" --nproc-per-node 4 --run-id st-prog \
    "$TOP/tests/amlrun/progress_worker.py" 400 20 2 40 >"$d/prog.out" 2>"$d/prog.err" &
pid_prog=$!
# Until every rank has shown 12 steps (the lag needs 8 in common).
deadline=$((SECONDS + 120))
while :; do
    "$AMLRUN" --status=json st-prog >"$d/prog.json" 2>/dev/null &&
        "$TORCH_PY" -c "
import json, sys
j = json.load(open('$d/prog.json'))
sys.exit(0 if all((r['step'] or 0) >= 12 for r in j['ranks']) else 1)" && break
    [ "$SECONDS" -ge "$deadline" ] && break
    sleep 0.2
done
check "progress: every rank's step and its age, rank 2 the one consistently last, with the largest lag" "$TORCH_PY" -c "
import json
j = json.load(open('$d/prog.json'))
r = sorted(j['ranks'], key=lambda r: r['rank'])
assert all(x['step'] >= 12 and x['step_age_s'] is not None for x in r), r
assert [x['consistently_last'] for x in r] == [False, False, True, False], r
assert max(r, key=lambda x: x['lag_s'])['rank'] == 2 and r[2]['lag_s'] > 0.05, r
assert r[2]['step'] < max(x['step'] for x in r), r"
"$AMLRUN" --status st-prog >"$d/prog.txt" 2>&1
check "progress: the table shows rank 2's lag marked" \
    grep -qE '^2 +2 +0 +[0-9]+ .* [0-9]+ +[0-9.]+s +\+[0-9.]+s\*$' "$d/prog.txt"
touch "$d/prog.stop"
wait "$pid_prog"
expect_eq "progress: the job ends normally (0)" "$?" 0

# --- two nodes (two amlruns here, on their control plane): each answers
# for the job; until the plane gathers every node's part, for its own node
# and saying how many of the job's nodes answered
port=$(free_port)
mkdir -p "$d/mn"
pids_mn=()
for r in 0 1; do
    "$AMLRUN" --nnodes 2 --node-rank "$r" --master-addr 127.0.0.1 --master-port "$port" \
        --nproc-per-node 2 --run-id st-mn "$d/worker.py" "$d/mn" >"$d/mn$r.out" 2>"$d/mn$r.err" &
    pids_mn+=($!)
done
if wait_for 4 60 "$d/mn" 'ready\.0\.[0-9]*$'; then
    for r in 0 1; do
        "$AMLRUN" --status=json "${pids_mn[$r]}" >"$d/mn$r.json" 2>&1
        expect_eq "two nodes: node $r's amlrun answers --status (0)" "$?" 0
        check "two nodes: node $r's answer covers the job, or says it covers only node $r" "$TORCH_PY" -c "
import json
j = json.load(open('$d/mn$r.json'))
ranks = sorted((x['rank'], x['node']) for x in j['ranks'])
nodes = sorted(n['node'] for n in j['nodes'])
assert j['nodes_in_job'] == 2, j
assert (nodes == [0, 1] and ranks == [(0, 0), (1, 0), (2, 1), (3, 1)]) or \
       (nodes == [$r] and ranks == [(2 * $r, $r), (2 * $r + 1, $r)]), j"
        "$AMLRUN" --status "${pids_mn[$r]}" >"$d/mn$r.txt" 2>&1
        check "two nodes: node $r's table says how many nodes answered, if not all" sh -c \
            "grep -q 'ranks on 2 nodes' '$d/mn$r.txt' || grep -q '^(1 of the job.s 2 nodes answered)' '$d/mn$r.txt'"
        "$AMLRUN" --stacks "${pids_mn[$r]}" >"$d/mnk$r.out" 2>&1
        expect_eq "two nodes: node $r's amlrun answers --stacks (0)" "$?" 0
        check "two nodes: its stacks are its ranks' (or every node's), at wait_here" \
            grep -qE "^amlrun:   ranks ($((2 * r))-$((2 * r + 1)) \(2\)|0-3 \(4\)): worker\.py:[0-9]+ wait_here" "$d/mnk$r.out"
    done
else
    fail "two nodes: the job did not start"
fi
touch "$d/mn/stop"
for r in 0 1; do
    wait "${pids_mn[$r]}"
    expect_eq "two nodes: node $r ends normally (0)" "$?" 0
done
