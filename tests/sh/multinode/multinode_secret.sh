#!/usr/bin/env bash
# Head-node mode's secret (issue 21): `amlrun --hosts n0:1,n1:1` through
# mpirun makes a random secret and hands it to every node's amlrun without
# putting it on any command line: while the job runs, no process's
# /proc/PID/cmdline holds its bytes, and another local user can read
# neither amlrun's nor a worker's /proc/PID/environ.  Nor is it in the
# logs (--log-dir), the event log (--event-log), amlrun's output and the
# failure summary, or --dry-run's output (text and json, -v included, with
# a secret the user gave).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
. "$TOP/tests/amlrun/common.sh"
. "$TOP/tests/amlrun/stranger.sh"
multinode_setup 2
d=$TEST_TMP
unset AMLDIST_JOB_TOKEN AMLDIST_JOB_TOKEN_FILE AMLDIST_REQUIRE_SECRET
export XDG_CONFIG_HOME=$d/config MASTER_PORT=$PORT
have_stranger=0
stranger_setup && have_stranger=1

# Each worker writes the secret it got (and a file saying it runs), then
# waits for the release; rank 1 then fails (so that a failure summary is
# printed), after rank 0's line.
W=$d/worker.sh
cat >"$W" <<'SH'
#!/bin/sh
[ -d "$AMLRUN_TEST_D" ] || exit 9
printf '%s' "$AMLDIST_JOB_TOKEN" >"$AMLRUN_TEST_D/tok.$RANK"
touch "$AMLRUN_TEST_D/pid.$RANK"
while [ ! -e "$AMLRUN_TEST_D/release" ]; do sleep 0.05; done
echo "rank $RANK done"
touch "$AMLRUN_TEST_D/done.$RANK"
# Rank 1 fails only once rank 0 has written its line: its failure stops
# the job, which on a loaded machine could come before rank 0 woke.
if [ "$RANK" = 1 ]; then
    while [ ! -e "$AMLRUN_TEST_D/done.0" ]; do sleep 0.05; done
    echo "rank 1 fails" >&2
    exit 3
fi
exit 0
SH
chmod +x "$W"

rc=0
AMLRUN_TEST_D=$d on n0 $T "$AMLRUN" --hosts n0:1,n1:1 --log-dir "$d/logs" --event-log "$d/events.json" \
    --no-python "$W" >"$d/out" 2>"$d/err" &
job=$!
end=$((SECONDS + 60))
until [ -e "$d/pid.0" ] && [ -e "$d/pid.1" ] || [ "$SECONDS" -ge "$end" ]; do sleep 0.05; done
secret=$(cat "$d/tok.0" 2>/dev/null)
check "head-node mode: every node's workers have the one secret, 32 hex digits" \
    sh -c '[ -n "$0" ] && [ "$0" = "$(cat "$1")" ] && echo "$0" | grep -qx "[0-9a-f]\{32\}"' \
    "$secret" "$d/tok.1"
# Every process of the machine while the job runs: mpirun, its daemons,
# both amlruns, the workers.
procs=$(grep -lsaF amlrun /proc/[0-9]*/cmdline | wc -l)
check "head-node mode: the job's processes are there to search ($procs with amlrun in their command line)" \
    test "$procs" -ge 2
if [ -n "$secret" ]; then
    # (the pattern from a file: grep's own command line must not hold it)
    expect_eq "head-node mode: no process's command line holds the secret" \
        "$(grep -lsaF -f "$d/tok.0" /proc/[0-9]*/cmdline)" ""
fi
# The job's processes: those with this test's marker in their
# environment (mpirun, both amlruns, the workers).
job_pids=$(grep -lsaF "AMLRUN_TEST_D=$d" /proc/[0-9]*/environ |
    sed -n 's|^/proc/\([0-9]*\)/environ$|\1|p' | grep -vx "$$" | tr '\n' ' ')
amlruns=0 workers=0
for p in $job_pids; do
    case $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) in
    */amlrun\ *) amlruns=$((amlruns + 1)) ;;
    "/bin/sh $W"*) workers=$((workers + 1)) ;;
    esac
done
diag "the job's processes: $job_pids"
check "head-node mode: both amlruns and both workers found ($amlruns, $workers)" \
    test "$amlruns" -ge 2 -a "$workers" -ge 2
if [ "$have_stranger" = 1 ]; then
    cp "$d/tok.0" "$STRANGER_DIR/tok" && chown "$STRANGER" "$STRANGER_DIR/tok"
    for p in $job_pids; do
        check "another user cannot read /proc/$p/environ (a process of the job)" \
            sh -c '! runuser -u "$0" -- cat "/proc/$1/environ" >/dev/null 2>&1' "$STRANGER" "$p"
        check "another user's grep of /proc/$p finds no secret" \
            sh -c '! runuser -u "$0" -- grep -sqaF -f "$2" "/proc/$1/cmdline" "/proc/$1/environ" "/proc/$1/status"' \
            "$STRANGER" "$p" "$STRANGER_DIR/tok"
    done
else
    skip "another user reading /proc/PID/environ" "not root, or no useradd/runuser"
fi
touch "$d/release"
wait "$job" || rc=$?
expect_eq "head-node mode: rank 1's failure is the job's status" "$rc" 3
check "head-node mode: the failure summary is printed" grep -q "rank 1" "$d/err"
check "head-node mode: the logs were written" sh -c 'grep -rqs "rank 0 done" "$0"' "$d/logs"
check "head-node mode: the event log was written" test -s "$d/events.json"
if [ -n "$secret" ]; then
    expect_eq "head-node mode: no log, event log, output or error file holds the secret" \
        "$(grep -rlaF -f "$d/tok.0" "$d/logs" "$d/events.json" "$d/out" "$d/err" /tmp/torchelastic_* 2>/dev/null)" ""
fi

# --dry-run: head-node mode's lines name no secret (none is made), and a
# secret the user gave shows in no output, -v included.
for form in --dry-run --dry-run=json; do
    out=$(AMLDIST_JOB_TOKEN=user-secret-$PORT-of-32-bytes-or-more on n0 $T "$AMLRUN" --hosts n0:1,n1:1 "$form" -v \
        --no-python true 2>&1)
    check "head-node $form -v: the user's secret is not in it" \
        sh -c '! printf "%s" "$0" | grep -qF "user-secret-"' "$out"
    out=$(AMLDIST_JOB_TOKEN=user-secret-$PORT-of-32-bytes-or-more "$AMLRUN" --nproc-per-node 2 "$form" -v \
        --no-python true 2>&1)
    check "one node $form -v: the user's secret is not in it, shown hidden" \
        sh -c 'printf "%s" "$0" | grep -q "AMLDIST_JOB_TOKEN.*(hidden)" && ! printf "%s" "$0" | grep -qF "user-secret-"' "$out"
done
expect_eq "no process left on any node" "$(leftovers)" ""
