#!/usr/bin/env bash
# Starting an attempt's workers in two phases (every worker started and
# let go, then the outcome of every exec waited for: issue 23; cloned into
# the job's cgroup on amlrun's memory where there is one, beside amlrun or,
# when they bind, held until their exec; forked elsewhere):
# a worker in the middle that
# cannot start is the one named, once, with its status; the workers that
# did start are stopped and none is left; a command that cannot run at all
# is still said once, for rank 0; the private run directory of error files
# (on /dev/shm when TMPDIR is unset and that is a tmpfs) is gone after the
# job.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
d=$TEST_TMP/spawn
mkdir -p "$d"
export OMP_NUM_THREADS=1

# --- a middle worker fails before its exec.  The azure topology puts GPUs
# 0-1 on NUMA node 1 and 2-3 on node 0; reordered, ranks 2 and 3 are bound
# to node 1, which this machine lacks: set_mempolicy fails in their
# children, after ranks 0 and 1 were started and let go.
AZ=$TOP/tests/topologies/azure-ndm-a100-v4.xml
marker=AMLRUN_SPAWN_TEST_$$
if [ -e /sys/devices/system/node/node1 ]; then
    skip "a middle worker cannot start" "this machine has a NUMA node 1"
else
    env "$marker=1" CUDA_VISIBLE_DEVICES=2,3,0,1 "$AMLRUN" --nproc-per-node 4 \
        --topology "$AZ" --cpu-bind none --mem-bind local --nic-bind none \
        --gpu-bind none --term-timeout 5 \
        sh -c 'echo "pid $$"; exec sleep 300' >"$d/out" 2>"$d/err"
    expect_eq "a middle worker cannot start: status 125" "$?" 125
    check "its rank is named, once, and no other's" \
        test "$(grep -c 'binding failed' "$d/err")" = 1 -a \
        "$(grep -c '^amlrun: rank 2 (local 2): binding failed: Invalid argument$' "$d/err")" = 1
    check "no summary of a success" sh -c '! grep -q "exited 0" "$1"' sh "$d/err"
    pids=$(sed -n 's/^pid //p' "$d/out")
    left=0
    for p in $pids; do
        kill -0 "$p" 2>/dev/null && left=$((left + 1))
    done
    expect_eq "the workers that started are gone when amlrun returns" "$left" 0
    check "no process of the job is left" wait_gone "$marker" 5
    # Ranks 0 and 1 may be stopped before their echo on a loaded machine;
    # ranks 2 and 3 never ran their command.
    n=$(printf '%s\n' $pids | grep -c .)
    diag "pids printed: $n (ranks 0 and 1, when they got that far)"
    check "no worker after the failing one ran the command (at most 2 pids printed)" \
        test "$n" -le 2
fi

# --- a command that cannot run at all (a directory: found, and refused by
# execve in every worker): one message, rank 0's, and a shell's status
env "$marker=2" "$AMLRUN" --nproc-per-node 8 --no-python "$d" \
    >/dev/null 2>"$d/err"
expect_eq "8 workers, a directory: 126" "$?" 126
check "8 workers, a directory: one message, rank 0's" \
    test "$(grep -c 'cannot run' "$d/err")" = 1 -a \
    "$(grep -c "^amlrun: rank 0 (local 0): cannot run $d: Is a directory$" "$d/err")" = 1
check "8 workers, a directory: no process left" wait_gone "$marker" 5
# The same with every binding off: every worker is cloned beside amlrun
# (where the job has its cgroup), and its failed exec comes back by the
# report pipe all the same.
env "$marker=3" "$AMLRUN" --nproc-per-node 8 --no-python --cpu-bind none \
    --mem-bind none --nic-bind none --gpu-bind none "$d" >/dev/null 2>"$d/err"
expect_eq "8 workers beside amlrun, a directory: 126" "$?" 126
check "8 workers beside amlrun, a directory: one message, rank 0's" \
    test "$(grep -c 'cannot run' "$d/err")" = 1 -a \
    "$(grep -c "^amlrun: rank 0 (local 0): cannot run $d: Is a directory$" "$d/err")" = 1
check "8 workers beside amlrun, a directory: no process left" wait_gone "$marker" 5

# --- the private run directory without TMPDIR: on /dev/shm when that is a
# tmpfs; the error file is writable before the worker runs; gone after.
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
    env -u TMPDIR "$AMLRUN" --nproc-per-node 2 \
        sh -c 'echo "$TORCHELASTIC_ERROR_FILE"; test -w "$(dirname "$TORCHELASTIC_ERROR_FILE")"' \
        >"$d/out" 2>"$d/err"
    expect_eq "without TMPDIR: the job succeeds (its directory writable)" "$?" 0
    f=$(head -1 "$d/out")
    case $f in /dev/shm/amlrun_*/none_*/attempt_0/[01]/error.json)
        ok "without TMPDIR: the error file lies on /dev/shm" ;;
    *) fail "without TMPDIR: the error file lies on /dev/shm"; diag "$f" ;; esac
    check "without TMPDIR: the private directory is gone after the job" \
        test ! -e "${f%%/none_*}"
else
    skip "the private run directory on /dev/shm" "/dev/shm is not a tmpfs"
fi

# --- descriptors: past the standard three, a worker (first or vforked)
# gets the progress page and nothing amlrun's own parent left open, as
# torchrun's (close_fds) and mpirun's workers; amlrun exits 0 and the
# parent's descriptor is still its own.
# (the worker is perl itself, which opens nothing but the listing it reads:
# a shell opens descriptors of its own for globs and substitutions)
exec 7>"$d/leak"
"$AMLRUN" --nproc-per-node 3 --cpu-bind none perl -e '
    opendir(my $d, "/proc/self/fd") or die;
    for (sort readdir $d) {
        next unless /^\d+$/ && $_ > 2;
        my $l = readlink("/proc/self/fd/$_");
        next if !defined $l || $l =~ m{^/proc/\d+/fd$};
        print "rank $ENV{RANK} fd $_ -> $l\n";
    }' >"$d/out" 2>"$d/err"
expect_eq "a descriptor amlrun's parent left open: the job succeeds" "$?" 0
check "no worker has it" sh -c '! grep -q "/leak$" "$1"' sh "$d/out"
pfd=$(env -u AMLDIST_PROGRESS_FD "$AMLRUN" --nproc-per-node 1 --cpu-bind none sh -c 'echo "$AMLDIST_PROGRESS_FD"' 2>/dev/null)
expect_eq "every worker has the progress page, under the number its environment names, and nothing else" \
    "$(sed 's/(deleted)//; s/ *$//' "$d/out" | sort -u | tr '\n' ' ')" \
    "rank 0 fd $pfd -> /memfd:amldist-progress rank 1 fd $pfd -> /memfd:amldist-progress rank 2 fd $pfd -> /memfd:amldist-progress "
check "the parent's descriptor is open still" test -e /proc/$$/fd/7
exec 7>&-
