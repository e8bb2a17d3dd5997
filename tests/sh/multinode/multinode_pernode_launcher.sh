#!/usr/bin/env bash
# A per-node launcher that sets RANK, LOCAL_RANK and WORLD_SIZE but no
# LOCAL_WORLD_SIZE (the Azure ML guide's launch.py, the old
# torch.distributed.launch), started once per node by a real outer launcher
# across two namespace nodes: Open MPI's mpirun --npernode 1 and MPICH's
# mpiexec.hydra -ppn 1 (which names no node count at all).  Its workers'
# amldist_init must derive what amlrun --nproc-per-node gives its own
# workers under the same outer launcher: LOCAL_WORLD_SIZE = WORLD_SIZE /
# the outer world, and the outer launcher's node.  Three ways: the outer
# launcher's own variables, amlrun's exports, amldist_init in the workers.
# amldist-test: slow (one of the longest: tests/run.sh starts it early)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
multinode_setup 2
stdin_without_end # mpiexec.hydra (tests/lib.sh)
HELLO=$BUILD/examples/hello
REPORT=$TOP/tests/amlrun/report.sh
K=3
OUT=$TEST_TMP/out
mkdir -p "$OUT"

# Each worker writes one line into $OUT (the launchers' output forwarding
# may join lines): report.sh's (what it was given), or, with LIB=1, what
# amldist_init derives, in report.sh's words.
WORKER=$TEST_TMP/worker.sh
cat >"$WORKER" <<EOF
#!/bin/sh
if [ "\${LIB-}" = 1 ]; then
    out=\$("$HELLO") || exit 1
    for v in RANK LOCAL_RANK NODE_RANK WORLD_SIZE LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT; do
        eval "\$v=\\\$(printf '%s\\n' \"\\\$out\" | sed -n \"s/^\$v=//p\")"
        export "\$v"
    done
fi
"$REPORT" >"$OUT/\$(hostname).\$RANK"
EOF
chmod +x "$WORKER"

# The per-node launcher, written after launch.py's facts: node rank = the
# outer rank, WORLD_SIZE = K * the outer world, worker i is rank
# node * K + i with LOCAL_RANK i; the master from the outer environment.
# It runs its arguments as each worker.
LAUNCH=$TEST_TMP/launch.sh
cat >"$LAUNCH" <<EOF
#!/bin/sh
node=\${OMPI_COMM_WORLD_RANK:-\$PMI_RANK}
nodes=\${OMPI_COMM_WORLD_SIZE:-\$PMI_SIZE}
i=0
while [ \$i -lt $K ]; do
    RANK=\$((node * $K + i)) LOCAL_RANK=\$i WORLD_SIZE=\$((nodes * $K)) "\$@" &
    i=\$((i + 1))
done
wait
EOF
chmod +x "$LAUNCH"

# OUTER: the outer launcher's own view of each node: "host OUTER_RANK
# OUTER_SIZE OUTER_LOCAL_SIZE".
OUTER=$TEST_TMP/outer.sh
cat >"$OUTER" <<'EOF'
#!/bin/sh
echo "$(hostname) ${OMPI_COMM_WORLD_RANK:-$PMI_RANK} ${OMPI_COMM_WORLD_SIZE:-$PMI_SIZE} ${OMPI_COMM_WORLD_LOCAL_SIZE:-$MPI_LOCALNRANKS}"
EOF
chmod +x "$OUTER"

lines() { cat "$OUT"/* 2>/dev/null | sort -t= -k2,2n; rm -f "$OUT"/*; }

# want MASTER PORT: the workers' lines, from the outer view: node i (outer
# rank i, alone on its host) has workers i*K .. i*K+K-1.
want() {
    sort -k2,2n "$TEST_TMP/outer" | while read -r host r size lsize; do
        [ "$lsize" = 1 ] || echo "outer local size $lsize, not 1"
        for i in $(seq 0 $((K - 1))); do
            printf '%s RANK=%s LOCAL_RANK=%s NODE_RANK=%s WORLD_SIZE=%s LOCAL_WORLD_SIZE=%s MASTER_ADDR=%s MASTER_PORT=%s\n' \
                "$host" $((r * K + i)) "$i" "$r" $((size * K)) "$K" "$1" "$2"
        done
    done
}

# outer_case NAME MASTER PORT OUTER-LAUNCHER...
outer_case() {
    local name=$1 master=$2 port=$3
    shift 3
    local rc=0
    on n0 $T "$@" "$OUTER" >"$TEST_TMP/outer" 2>"$TEST_TMP/err" || rc=$?
    got=$(awk '{print $1, $2, $4}' "$TEST_TMP/outer" | sort -k2,2n | tr '\n' ' ')
    expect_eq "$name: the outer launcher runs one process on each node" "$got" "n0 0 1 n1 1 1 "
    # (Hydra, beside other programs, once in a few runs printed nothing at
    # all here: its status and stderr, for the next time)
    [ "$got" = "n0 0 1 n1 1 1 " ] || diag "status $rc; $(tail -c 600 "$TEST_TMP/err")"
    on n0 $T "$@" "$LAUNCH" env LIB=1 "$WORKER" >"$TEST_TMP/log" 2>&1
    got=$(lines)
    expect_eq "$name: a launch.py-like launcher's workers: amldist_init" "$got" "$(want "$master" "$port")"
    [ "$got" = "$(want "$master" "$port")" ] || diag "$(tail -c 600 "$TEST_TMP/log")"
    on n0 $T "$@" "$LAUNCH" "$AMLRUN" --cpu-bind none "$WORKER" >"$TEST_TMP/log" 2>&1
    got=$(lines)
    expect_eq "$name: a launch.py-like launcher's workers: amlrun in their place exports the same" \
        "$got" "$(want "$master" "$port")"
    [ "$got" = "$(want "$master" "$port")" ] || diag "$(tail -c 600 "$TEST_TMP/log")"
    on n0 $T "$@" "$AMLRUN" --nproc-per-node "$K" --master-port "$port" "$WORKER" >"$TEST_TMP/log" 2>&1
    got=$(lines)
    expect_eq "$name: amlrun --nproc-per-node $K exports the same" "$got" "$(want "$master" "$port")"
    [ "$got" = "$(want "$master" "$port")" ] || diag "$(tail -c 600 "$TEST_TMP/log")"
    on n0 $T "$@" "$AMLRUN" --nproc-per-node "$K" --master-port "$port" env LIB=1 "$WORKER" >"$TEST_TMP/log" 2>&1
    expect_eq "$name: amldist_init in amlrun's workers agrees" "$(lines)" "$(want "$master" "$port")"
}

A=$(node_addr n0)
outer_case "mpirun --npernode 1" "$A" "$PORT" \
    $MPIRUN --host n0,n1 --npernode 1 --bind-to none -x MASTER_PORT="$PORT"
outer_case "mpirun --npernode 1, Azure ML's AZ_BATCH_MASTER_NODE" n0 6105 \
    $MPIRUN --host n0,n1 --npernode 1 --bind-to none -x AZ_BATCH_MASTER_NODE=n0:6105
if have mpiexec.hydra; then
    outer_case "mpiexec.hydra -ppn 1 (no node count)" n0 $((PORT + 1)) \
        mpiexec.hydra -launcher ssh -launcher-exec "$TOP/scripts/ompi-rsh-agent" -hosts n0,n1 \
        -n 2 -ppn 1 -genv MASTER_ADDR n0 -genv MASTER_PORT $((PORT + 1))
else
    skip "per-node launcher under Hydra" "mpiexec.hydra not installed (Debian package mpich)"
fi

expect_eq "no process left on any node" "$(leftovers)" ""
