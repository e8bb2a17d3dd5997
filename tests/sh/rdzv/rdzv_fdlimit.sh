#!/usr/bin/env bash
# The host's descriptors (issue 40): it holds a connection a node, and the
# usual soft RLIMIT_NOFILE (1024) is below what a large job needs.  The
# host raises its soft limit to the hard one at its start: under `ulimit
# -Sn 64`, a host forms a job of 100 agents (each its own amlrun), more
# than its soft limit allowed, its worker keeping the soft limit amlrun was
# started with.  Where the hard limit is too low, the host
# refuses at once, naming the limit and the number needed, and starts no
# worker (exit 125), also for an elastic job's MAX.  In a network
# namespace of this test's own (fixed ports).
# No etcd variant: the TCP host's descriptors (c10d's alone).
if [ -z "${RDZV_FDLIMIT_NETNS:-}" ] && unshare -n true 2>/dev/null; then
    exec env RDZV_FDLIMIT_NETNS=1 unshare -n bash "$0" "$@"
fi
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
if [ -z "${RDZV_FDLIMIT_NETNS:-}" ]; then
    skip "the host's descriptor limit" "no network namespace (unshare -n)"; exit 0
fi
ip link set lo up
d=$TEST_TMP
unset AMLDIST_JOB_TOKEN AMLDIST_JOB_TOKEN_FILE AMLDIST_REQUIRE_SECRET
export XDG_CONFIG_HOME=$d/config OMP_NUM_THREADS=1
T="timeout -k 5 120"
N=100

# listening PORT: whether something listens on 127.0.0.1:PORT.
listening() {
    grep -qi "^ *[0-9]*: 0100007F:$(printf '%04X' "$1") 00000000:0000 0A" /proc/net/tcp
}

# The host first, under a soft limit below the job's connections (its hard
# limit as it was); the N-1 other agents once it listens.
[ "$(ulimit -Hn)" = unlimited ] || [ "$(ulimit -Hn)" -ge $((N + 200)) ] ||
    { skip "a host under ulimit -Sn 64" "hard limit $(ulimit -Hn)"; exit 0; }
job="--cpu-bind none --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:29800 --nnodes $N --nproc-per-node 1"
(ulimit -Sn 64; exec $T "$AMLRUN" $job --no-python sh -c 'ulimit -Sn >"$1"; touch "$0"' "$d/ran.0" "$d/nofile.host" \
    >"$d/out.host" 2>"$d/err.host") &
host=$!
for _ in $(seq 200); do listening 29800 && break; nap 0.05; done
check "the host (soft limit 64) listens" listening 29800
pids=
for i in $(seq 1 $((N - 1))); do
    $T "$AMLRUN" $job --no-python sh -c 'touch "$0"' "$d/ran.$i" \
        >/dev/null 2>"$d/err.$i" &
    pids="$pids $!"
done
bad=0
for p in $pids; do wait "$p" || bad=$((bad + 1)); done
rc=0; wait "$host" || rc=$?
expect_eq "soft limit 64, $N agents: the host exits 0" "$rc" 0
expect_eq "soft limit 64, $N agents: every other agent exits 0" "$bad" 0
nfiles "$d" 'ran\.'
expect_eq "soft limit 64, $N agents: every worker ran once" "$NFILES" $N
[ "$rc" = 0 ] || sed 's/^/# host: /' "$d/err.host"
# the limit raised is the host's own: its worker has the one amlrun had
expect_eq "soft limit 64: the host's worker starts with it, not the raised one" \
    "$(cat "$d/nofile.host" 2>/dev/null)" 64

# refused NAME NNODES NEED: under a hard limit of 200, a job of NNODES is
# refused at once with the words, and no worker starts.
refused() {
    local name=$1 nn=$2 need=$3 rc=0
    rm -f "$d/ran.r"
    (ulimit -n 200; exec timeout -k 5 30 "$AMLRUN" --cpu-bind none --rdzv-backend c10d \
        --rdzv-endpoint 127.0.0.1:29810 --nnodes "$nn" --nproc-per-node 1 \
        --no-python sh -c 'touch "$0"' "$d/ran.r" >"$d/out.r" 2>"$d/err.r") || rc=$?
    expect_eq "$name: refused (exit status 125)" "$rc" 125
    check "$name: the words name the nodes, the number needed and the hard limit" \
        grep -q "hosting a job of up to ${nn##*:} nodes needs $need open files (a connection a node and 128 more), and this process's hard limit (RLIMIT_NOFILE, ulimit -Hn) is 200" "$d/err.r"
    check "$name: no worker started" test ! -e "$d/ran.r"
    [ "$rc" = 125 ] || sed 's/^/# stderr: /' "$d/err.r"
}
refused "hard limit 200, 300 nodes" 300 428
refused "hard limit 200, nodes 2:300" 2:300 428
# A job that fits under the hard limit is not refused: one node of 1:72.
rc=0
(ulimit -n 200; exec $T "$AMLRUN" --cpu-bind none --rdzv-backend c10d \
    --rdzv-endpoint 127.0.0.1:29820 --nnodes 1:72 --nproc-per-node 1 \
    --rdzv-conf last_call_timeout=0.1 --no-python true >/dev/null 2>"$d/err.fit") || rc=$?
expect_eq "hard limit 200, nodes 1:72 (200 needed): one node's job exits 0" "$rc" 0
