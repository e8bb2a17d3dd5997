#!/usr/bin/env bash
# Process lifetime: a worker not born in the job's containment is
# registered with the orphan guard before it execs (a SIGKILL of amlrun
# frozen right after a fork leaves nothing behind); the job's containment (a cgroup with cgroup.kill, else a PID
# namespace, else process groups only, as -v says) ends descendants that
# left their process group with setsid, and leaves no cgroup behind; a
# command that cannot run is named with the real reason (a directory, a
# missing #! interpreter, an empty command), with status 126 or 127.
# Processes are found by a unique marker in their environment.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
d=$TEST_TMP/lifetime
mkdir -p "$d"

# state PID: the state letter in /proc/PID/stat
state() { sed -n 's/^[0-9]* (.*) \(.\) .*/\1/p' "/proc/$1/stat" 2>/dev/null; }

# wait_stopped PID TIMEOUT: until PID is stopped (T)
wait_stopped() {
    local deadline=$((SECONDS + $2))
    until [ "$(state "$1")" = T ]; do
        [ "$SECONDS" -ge "$deadline" ] && return 1
        sleep 0.02
    done
}

# leftovers MARKER: name and kill what survived, so later cases start clean
leftovers() {
    local left
    left=$(marked_pids "$1")
    [ -z "$left" ] && return
    diag "left: $(echo $left)"
    ps -o pid,ppid,pgid,sid,stat,args -p $left 2>/dev/null | sed 's/^/# /'
    kill -KILL $left 2>/dev/null
}

# containment FILE: what -v said is in force (cgroup, pidns, pgroups, ?)
containment() {
    case $(grep '^amlrun: orphans: ' "$1") in
    "amlrun: orphans: the job's cgroup "*) echo cgroup ;;
    "amlrun: orphans: a PID namespace "*) echo pidns ;;
    "amlrun: orphans: process groups only "*) echo pgroups ;;
    *) echo "?" ;;
    esac
}

# --- the start-up window: amlrun frozen (SIGSTOP by the test hook) right
# after it forked the first worker, then SIGKILLed.  Nothing of the job may
# survive.  With process groups alone the child must not run the command
# before the guard knows its group: if it did, the worker's children would
# outlive amlrun.  A child born in the job's cgroup or PID namespace may go
# on (the guard ends either as a whole).
worker='sleep 300 & (sleep 300 &); touch "$0/ready.$RANK"; wait'
for contain in pgroups pidns cgroup; do
    marker="AMLRUN_TEST_MARKER=lifetime-window-$contain-$$-$RANDOM$RANDOM"
    rm -f "$d"/ready.*
    env "$marker" AMLDIST_TEST_CONTAIN=$contain AMLDIST_TEST_STOP_AFTER_FORK=1 \
        "$AMLRUN" -v --nproc-per-node 2 sh -c "$worker" "$d" 2>"$d/err.window" &
    pid=$!
    if wait_stopped "$pid" 30; then
        # Give the forked child all the time it needs to get as far as it
        # can (exec, children, the ready file).
        wait_for 1 1 "$d" ready. || :
        kill -KILL "$pid"
        wait "$pid" 2>/dev/null
        got=$(containment "$d/err.window")
        check "SIGKILL of amlrun frozen right after a fork ($got): nothing of the job survives" \
            wait_gone "$marker" 20
        if [ "$contain" = pgroups ]; then
            expect_eq "frozen after a fork (pgroups): the worker never ran the command" \
                "$(ls "$d" | grep -c '^ready\.')" 0
        fi
    else
        fail "amlrun did not stop after its first fork ($contain)"
        kill -KILL "$pid"; wait "$pid" 2>/dev/null
    fi
    leftovers "$marker"
done

# escape LABEL ENV...: a job whose workers start a grandchild that leaves
# their process group and session (setsid) and whose parent exits
# (double fork); amlrun is SIGKILLed (see ESCAPE_KILL below).  Sets $mode (what -v said) and $cg
# (the job's cgroup, if any).
escape() {
    local label=$1; shift
    marker="AMLRUN_TEST_MARKER=lifetime-$label-$$-$RANDOM$RANDOM"
    rm -f "$d"/ready.*
    # ESCAPE_CGROUP: amlrun starts in that cgroup (its job cgroup is made
    # inside it)
    ( [ -z "${ESCAPE_CGROUP:-}" ] || echo "$BASHPID" >"$ESCAPE_CGROUP/cgroup.procs"
      exec env "$marker" "$@" "$AMLRUN" -v --nproc-per-node 2 sh -c \
        '(setsid sh -c "sleep 300 & sleep 300" &); sleep 300 & touch "$0/ready.$RANK"; wait' \
        "$d" 2>"$d/err.$label" ) &
    pid=$!
    mode=? cg=
    if ! wait_for 2 30 "$d" ready.; then
        fail "$label: workers did not start"
        kill -KILL "$pid"; wait "$pid" 2>/dev/null
        return 1
    fi
    mode=$(containment "$d/err.$label")
    cg=$(sed -n 's/^amlrun: orphans: the job.s cgroup \([^ ]*\) .*/\1/p' "$d/err.$label")
    # wait until both escaped sessions exist (a process whose session is
    # not amlrun's, nor a worker's group)
    local deadline=$((SECONDS + 10)) n
    while :; do
        n=0
        for p in $(marked_pids "$marker"); do
            [ "$(ps -o sid= -p "$p" | tr -d ' ')" = "$p" ] && n=$((n + 1))
        done
        [ "$n" -ge 2 ] || [ "$SECONDS" -ge "$deadline" ] && break
        sleep 0.02
    done
    [ "$n" -ge 2 ] || diag "$label: only $n escaped sessions"
    # ESCAPE_KILL=both: amlrun and its guard in one kill, as pkill -9 amlrun
    # (the guard first: pkill's order, amlrun first, leaves the guard a
    # moment in which it may still clean up, and the window is the other
    # case); guard-then-term: the guard alone, then a stop request to amlrun
    local guard
    guard=$(pgrep -P "$pid" -x amlrun-guard)
    case ${ESCAPE_KILL:-} in
    both) kill -KILL $guard "$pid" ;;
    guard-then-term) kill -KILL $guard; kill -TERM "$pid" ;;
    *) kill -KILL "$pid" ;;
    esac
    wait "$pid" 2>/dev/null
    # A SIGKILLed guard is no survivor, but it carries the marker (a fork of
    # amlrun) until it has exited, in amlrun's cgroup, not the job's: the
    # survivors are counted once it is gone (a beside-others run counted it).
    local n=0 state
    for p in $guard; do
        while [ $((n++)) -lt 500 ] && read -r state <"/proc/$p/stat" 2>/dev/null &&
              state=${state##*) } && [ "${state%% *}" != Z ]; do
            nap 0.02
        done
    done
    return 0
}

# --- default containment: on a machine that allows a cgroup or a PID
# namespace, nothing survives, setsid'd grandchildren included
if escape default; then
    case $mode in
    pgroups)
        skip "setsid'd grandchildren die with amlrun (default)" \
            "no cgroup or PID namespace here: $(grep '^amlrun: orphans: ' "$d/err.default")"
        ;;
    *)
        check "SIGKILL of amlrun: setsid'd double-forked grandchildren die too ($mode)" \
            wait_gone "$marker" 20
        ;;
    esac
    if [ "$mode" = cgroup ]; then
        check "SIGKILL of amlrun: the job's cgroup $cg is removed" \
            sh -c "for i in \$(seq 100); do [ -d '$cg' ] || exit 0; sleep 0.05; done; exit 1"
    fi
fi
leftovers "$marker"

# --- cgroup: the guard SIGKILLed alone, amlrun then stopped: amlrun's
# cgroup.kill at the job's end still takes the escaped sessions
if ESCAPE_KILL=guard-then-term escape guard AMLDIST_TEST_CONTAIN=cgroup; then
    if [ "$mode" = cgroup ]; then
        check "SIGKILL of the guard alone, then SIGTERM: setsid'd grandchildren die too" \
            wait_gone "$marker" 20
    else
        skip "SIGKILL of the guard alone" "no cgroup here: $(grep '^amlrun: orphans: ' "$d/err.guard")"
    fi
fi
leftovers "$marker"
[ -n "$cg" ] && rmdir "$cg" 2>/dev/null

# --- cgroup: amlrun and its guard SIGKILLed together (pkill -9 amlrun):
# the window BUGS in amlrun.1 documents, and its way out: what left its
# group survives, inside the job's cgroup, whose cgroup.kill ends it
# A cgroup of the test's own, where this amlrun and the next start: the job
# cgroup left behind is then seen by no other test's amlrun.
own=$(findmnt -n -t cgroup2 -o TARGET 2>/dev/null | head -n 1)$(sed -n 's/^0:://p' /proc/self/cgroup)
mine=${own%/}/amldist-test-$$
mkdir "$mine" 2>/dev/null || mine=
if [ -z "$mine" ]; then
    skip "SIGKILL of amlrun and its guard" "cannot make a cgroup under $own"
elif ESCAPE_CGROUP=$mine ESCAPE_KILL=both escape both AMLDIST_TEST_CONTAIN=cgroup; then
    if [ "$mode" = cgroup ]; then
        left=$(marked_pids "$marker")
        check "SIGKILL of amlrun and its guard: the setsid'd grandchildren survive, as documented" \
            test -n "$left"
        out=0 here=
        for p in $left; do
            # A worker that amlrun's death killed (PR_SET_PDEATHSIG) may be
            # listed above and gone here: gone is no survivor.
            here=$(cat "/proc/$p/cgroup" 2>/dev/null) && [ -n "$here" ] || continue
            grep -q "${cg##*/}\$" <<<"$here" || out=$((out + 1))
        done
        expect_eq "SIGKILL of both: every survivor is in the job's cgroup ${cg##*/}" "$out" 0
        # the next amlrun in the same cgroup names it (a minute later: the
        # cgroup is made to look older), and leaves it be
        touch -d '2 minutes ago' "$cg"
        ( echo "$BASHPID" >"$mine/cgroup.procs"
          AMLDIST_TEST_CONTAIN=cgroup exec "$AMLRUN" --nproc-per-node 1 true 2>"$d/err.next" )
        expect_eq "SIGKILL of both: the next amlrun runs (exit 0)" "$?" 0
        check "SIGKILL of both: the next amlrun names the cgroup and its cgroup.kill" \
            grep -qF "warning: $cg, the cgroup of an amlrun (pid ${cg##*/amlrun-}) that is gone, still holds processes" "$d/err.next"
        check "SIGKILL of both: ... with the way to end them" \
            grep -qF "'echo 1 > $cg/cgroup.kill' ends them" "$d/err.next"
        check "SIGKILL of both: the next amlrun leaves it as it is (populated)" \
            grep -qx 'populated 1' "$cg/cgroup.events"
        echo 1 >"$cg/cgroup.kill"
        check "SIGKILL of both: the job's cgroup.kill ends them, as BUGS says" \
            wait_gone "$marker" 20
        for _ in $(seq 100); do rmdir "$cg" 2>/dev/null && break; sleep 0.05; done
        check "SIGKILL of both: the emptied cgroup can be removed" test ! -d "$cg"
    else
        skip "SIGKILL of amlrun and its guard" "no cgroup here: $(grep '^amlrun: orphans: ' "$d/err.both")"
    fi
fi
leftovers "$marker"
if [ -n "$mine" ]; then
    for _ in $(seq 100); do rmdir "$mine"/amlrun-* "$mine" 2>/dev/null; [ -d "$mine" ] || break; sleep 0.05; done
    check "the test's own cgroup is removed" test ! -d "$mine"
fi

# --- amlrun in a cgroup that was once killed (systemd kills a service's):
# Linux 6.x then kills a child cloned into the job's cgroup at birth
# (launcher/contain/cgroup.c).  amlrun sees that its first worker was
# killed before it ran, and forks and moves its workers: every rank runs.
# As it comes, and with amlrun stopped after each fork (the test hook,
# continued at each stop), which gives the first child time to die.
killed=${own%/}/amldist-test-killed-$$
if ! mkdir "$killed" 2>/dev/null; then
    skip "a cgroup once killed" "cannot make a cgroup under $own"
else
    echo 1 >"$killed/cgroup.kill"
    for how in default stopped; do
        hook=()
        [ "$how" = stopped ] && hook=(AMLDIST_TEST_STOP_AFTER_FORK=1)
        ( echo "$BASHPID" >"$killed/cgroup.procs"
          exec env "${hook[@]}" AMLDIST_TEST_CONTAIN=cgroup "$AMLRUN" -v --nproc-per-node 3 \
              --cpu-bind none sh -c 'echo "rank=$RANK"' >"$d/out.killed" 2>"$d/err.killed" ) &
        pid=$!
        # the hook stops amlrun after each fork: go on
        while kill -0 "$pid" 2>/dev/null; do
            [ "$(state "$pid")" = T ] && kill -CONT "$pid"
            sleep 0.01
        done
        wait "$pid"
        rc=$?
        if [ "$(containment "$d/err.killed")" != cgroup ]; then
            skip "a cgroup once killed, $how" "no cgroup: $(grep '^amlrun: orphans: ' "$d/err.killed")"
            continue
        fi
        expect_eq "a cgroup once killed, $how: exit 0" "$rc" 0
        expect_eq "a cgroup once killed, $how: every rank ran" \
            "$(sort "$d/out.killed" | tr '\n' ' ')" "rank=0 rank=1 rank=2 "
        [ "$rc" = 0 ] || sed 's/^/# /' "$d/err.killed"
    done
    for _ in $(seq 100); do rmdir "$killed"/amlrun-* "$killed" 2>/dev/null; [ -d "$killed" ] || break; sleep 0.05; done
    check "a cgroup once killed: the test's cgroup is removed" test ! -d "$killed"
fi

# --- a PID namespace, where permitted (forced by the test hook)
if escape pidns AMLDIST_TEST_CONTAIN=pidns; then
    if [ "$mode" = pidns ]; then
        check "PID namespace: setsid'd double-forked grandchildren die with amlrun" \
            wait_gone "$marker" 20
    else
        skip "PID namespace" "not permitted here: $(grep '^amlrun: orphans: ' "$d/err.pidns")"
    fi
fi
leftovers "$marker"

# --- a PID namespace closes that window: its init's death kills the rest
if ESCAPE_KILL=both escape pidnsboth AMLDIST_TEST_CONTAIN=pidns; then
    if [ "$mode" = pidns ]; then
        check "PID namespace: SIGKILL of amlrun and its guard together: nothing survives" \
            wait_gone "$marker" 20
    else
        skip "PID namespace, SIGKILL of both" "not permitted here: $(grep '^amlrun: orphans: ' "$d/err.pidnsboth")"
    fi
fi
leftovers "$marker"

# --- process groups only (forced): -v says what it does not cover
if escape pgroups AMLDIST_TEST_CONTAIN=pgroups; then
    expect_eq "process groups only: -v says so" "$mode" pgroups
    check "process groups only: -v names the setsid limit" \
        grep -q '^amlrun: orphans: process groups only .*setsid' "$d/err.pgroups"
    # the documented limit: what left its group survives
    check "process groups only: setsid'd grandchildren survive, as documented" \
        test -n "$(marked_pids "$marker")"
    # and only that: the background sleep in each worker's group is ended
    # by the guard, which amlrun told the group before the worker's exec
    insid() {
        local p
        for p in $(marked_pids "$marker"); do
            [ "$(ps -o sid= -p "$p" | tr -d ' ')" = "$(ps -o sid= -p $$ | tr -d ' ')" ] && echo "$p"
        done
    }
    expect_eq "process groups only: no survivor in the job's session (the guard ended the workers' groups)" \
        "$(settled 40 0.05 insid)" ""
    left=$(marked_pids "$marker")
    [ -n "$left" ] && kill -KILL $left
fi
leftovers "$marker"

# --- normal ends, in each containment that this machine allows
for forced in "" cgroup pidns pgroups; do
    label=${forced:-default}
    marker="AMLRUN_TEST_MARKER=lifetime-end-$label-$$-$RANDOM"
    envs=("$marker")
    [ -n "$forced" ] && envs+=("AMLDIST_TEST_CONTAIN=$forced")
    # workers leave a setsid'd grandchild that holds their stdout: amlrun
    # still ends, and nothing is left when it returns
    out=$(env "${envs[@]}" "$AMLRUN" -v --nproc-per-node 2 sh -c \
        '(setsid sleep 300 &); echo "rank $RANK"; grep -c "amlrun-[0-9]*$" /proc/self/cgroup
         read -r me _ </proc/self/stat; echo "self $me $$"; exit 0' \
        2>"$d/err.end")
    rc=$?
    m=$(containment "$d/err.end")
    if [ -n "$forced" ] && [ "$m" != "$forced" ]; then
        skip "normal end ($label)" "not in force here: $(grep '^amlrun: orphans: ' "$d/err.end")"
        leftovers "$marker"
        continue
    fi
    expect_eq "normal end ($label, $m): status 0" "$rc" 0
    expect_eq "normal end ($label, $m): both ranks ran" \
        "$(echo "$out" | grep -c '^rank [01]$')" 2
    expect_eq "normal end ($label, $m): nothing left when amlrun returns" \
        "$(marked_pids "$marker")" ""
    expect_eq "normal end ($label, $m): a worker's pid names it in its /proc" \
        "$(echo "$out" | awk '$1 == "self" && $2 == $3' | wc -l)" 2
    if [ "$m" = cgroup ]; then
        expect_eq "cgroup: every worker ran in the job's cgroup" \
            "$(echo "$out" | grep -cx 1)" 2
        cg=$(sed -n 's/^amlrun: orphans: the job.s cgroup \([^ ]*\) .*/\1/p' "$d/err.end")
        check "cgroup: $cg removed when amlrun returns" test -n "$cg" -a ! -d "$cg"
    fi
    # a failing rank, a restart: statuses pass through, the first failure's
    # (rank 1 fails later: two ranks that fail at once may end either way)
    env "${envs[@]}" "$AMLRUN" --nproc-per-node 2 --max-restarts 1 \
        sh -c '[ "$RANK" = 1 ] && sleep 5; exit $((RANK + 3))' >/dev/null 2>&1
    expect_eq "failing job with a restart ($label, $m): status 3" "$?" 3
    leftovers "$marker"
done

# --- a worker ends leaving a stray that holds its output pipe open while
# another worker still runs: amlrun reaps it, drains its pipe and must not
# then block reading that pipe (a stale poll result); several tries, since
# it takes the exit and the output in one poll round
hung=0
marker="AMLRUN_TEST_MARKER=lifetime-stray-$$-$RANDOM$RANDOM"
for i in 1 2 3 4 5 6 7 8 9 10; do
    timeout -s KILL 10 env "$marker" "$AMLRUN" --nproc-per-node 2 sh -c \
        'if [ $RANK = 0 ]; then (setsid sleep 300 &); echo out; exit 0; fi; sleep 0.2' \
        >/dev/null 2>&1
    [ $? = 137 ] && hung=$((hung + 1))
done
expect_eq "a stray holding a reaped worker's pipe: amlrun never hangs (10 runs)" "$hung" 0
leftovers "$marker"

# --- commands that cannot run: the real reason, once, with a shell's status
"$AMLRUN" --nproc-per-node 2 "$d" >/dev/null 2>"$d/err"
expect_eq "a directory: 126" "$?" 126
check "a directory: said so, once" \
    test "$(grep -c "^amlrun: rank 0 (local 0): cannot run $d: Is a directory$" "$d/err")" = 1 -a \
    "$(wc -l <"$d/err")" = 1
printf '#!/nonexistent/interp -x\necho hi\n' >"$d/badinterp"
chmod 755 "$d/badinterp"
"$AMLRUN" --nproc-per-node 2 "$d/badinterp" >/dev/null 2>"$d/err"
expect_eq "#! interpreter missing: 127" "$?" 127
check "#! interpreter missing: the interpreter is named, once" \
    test "$(grep -c "^amlrun: rank 0 (local 0): cannot run $d/badinterp: bad interpreter /nonexistent/interp: No such file or directory$" "$d/err")" = 1 -a \
    "$(wc -l <"$d/err")" = 1
# a binary whose ELF interpreter (PT_INTERP) is missing: /bin/true with
# its loader's name changed in its last byte
interp=$(readelf -l /bin/true 2>/dev/null | sed -n 's/.*interpreter: \(.*\)]$/\1/p')
if [ -n "$interp" ] && "$TORCH_PY" -c '
import sys
b = open("/bin/true", "rb").read(); old = sys.argv[1].encode()
open(sys.argv[2], "wb").write(b.replace(old, old[:-1] + b"X", 1))' "$interp" "$d/badelf"; then
    chmod 755 "$d/badelf"
    "$AMLRUN" "$d/badelf" >/dev/null 2>"$d/err"
    expect_eq "ELF interpreter missing: 127" "$?" 127
    check "ELF interpreter missing: named" \
        grep -q ": cannot run $d/badelf: its ELF interpreter ${interp%?}X: No such file or directory$" "$d/err"
else
    skip "ELF interpreter missing" "no readelf or no interpreter in /bin/true"
fi
"$AMLRUN" --nproc-per-node 2 "" >/dev/null 2>"$d/err"
expect_eq "empty command: 127" "$?" 127
expect_eq "empty command: said so" "$(cat "$d/err")" "amlrun: the command is empty"
# per-process mode execs in place: the same reasons
penv=(RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1)
env "${penv[@]}" "$AMLRUN" --mode process "$d" >/dev/null 2>"$d/err"
expect_eq "per-process, a directory: 126" "$?" 126
check "per-process, a directory: said so" grep -q ": cannot run $d: Is a directory$" "$d/err"
env "${penv[@]}" "$AMLRUN" --mode process "$d/badinterp" >/dev/null 2>"$d/err"
expect_eq "per-process, #! interpreter missing: 127" "$?" 127
check "per-process, #! interpreter missing: named" \
    grep -q ": cannot run $d/badinterp: bad interpreter /nonexistent/interp: No such file or directory$" "$d/err"
# a file that is not executable and a missing one keep their messages
# (--no-python: without it, such a file runs under python, as in torchrun)
printf 'echo hi\n' >"$d/noexec"; chmod 644 "$d/noexec"
"$AMLRUN" --no-python "$d/noexec" >/dev/null 2>"$d/err"
expect_eq "not executable: 126" "$?" 126
check "not executable: Permission denied" grep -q ": cannot run $d/noexec: Permission denied$" "$d/err"
"$AMLRUN" "$d/missing" >/dev/null 2>"$d/err"
expect_eq "missing: 127" "$?" 127
check "missing: No such file or directory" grep -q "No such file or directory$" "$d/err"
