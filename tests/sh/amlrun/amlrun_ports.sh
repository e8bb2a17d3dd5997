#!/usr/bin/env bash
# The ports of a one-node job, as a torchrun user gives them: torchrun 2.x's
# --rdzv-endpoint localhost:0 (a free port, one node only; refused with more
# nodes or a host that is not this machine), and MASTER_PORT 29500 held by
# another program: the default gives way to a free port (PyTorch DDP then
# runs), a port the user named is refused before any worker starts;
# --standalone picks its own (refused beside other amlruns of a launcher);
# --dry-run and in-place mode are left alone.
# It runs in a network namespace of its own, so that the port it holds is
# nobody else's and nobody else's 29500 is seen.
if [ -z "${AMLRUN_PORTS_NETNS:-}" ] && unshare -n true 2>/dev/null; then
    exec env AMLRUN_PORTS_NETNS=1 unshare -n bash "$0" "$@"
fi
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
if [ -z "${AMLRUN_PORTS_NETNS:-}" ]; then
    skip "ports of a one-node job" "no network namespace (unshare -n)"; exit 0
fi
ip link set lo up
d=$TEST_TMP
A=("$AMLRUN" --cpu-bind none)
show='echo "rank $RANK port $MASTER_PORT"'

# --- localhost:0 with c10d, as torchrun's documentation has it for one node
"${A[@]}" -v --rdzv_backend c10d --rdzv_endpoint localhost:0 --nnodes 1 \
    --nproc-per-node 2 sh -c "$show" >"$d/o" 2>"$d/e"
expect_eq "c10d localhost:0, one node: exit 0" "$?" 0
expect_eq "c10d localhost:0: both ranks ran" "$(grep -c '^rank [01] port [0-9]' "$d/o")" 2
check "c10d localhost:0: this node hosts the rendezvous" grep -q 'this node hosts it' "$d/e"
check "c10d localhost:0: the workers' MASTER_PORT is a real port" \
    sh -c '! grep -q "port 0$" "$1"' sh "$d/o"
"${A[@]}" --rdzv-backend c10d --rdzv-endpoint '[::1]:0' --nproc-per-node 1 sh -c "$show" >"$d/o" 2>"$d/e"
rc=$?
if [ $rc = 0 ]; then ok "c10d [::1]:0: exit 0"
elif grep -q 'not one of its addresses' "$d/e"; then skip "c10d [::1]:0: exit 0" "no IPv6 loopback here"
else fail "c10d [::1]:0: exit 0"; sed 's/^/#   /' "$d/e"; fi

# more nodes could never learn the port: refused before anything starts
for n in 2 1:2; do
    "${A[@]}" --rdzv-backend c10d --rdzv-endpoint localhost:0 --nnodes $n true 2>"$d/e"
    expect_eq "c10d localhost:0 --nnodes $n: refused (exit 2)" "$?" 2
    check "c10d localhost:0 --nnodes $n: the message says port 0 is for one node" \
        grep -q "port 0 (a free port, picked here) is for one node, and --nnodes is $n" "$d/e"
done
"${A[@]}" --rdzv-endpoint localhost:0 --nnodes 2 --node-rank 0 true 2>"$d/e"
expect_eq "static localhost:0 --nnodes 2: refused (exit 2)" "$?" 2
if have mpirun; then
    # two amlruns of one job would each pick a port of their own
    timeout 60 $MPIRUN -np 2 "${A[@]}" --nproc-per-node 1 --rdzv-backend c10d \
        --rdzv-endpoint localhost:0 sh -c 'echo started' >"$d/o" 2>"$d/e"
    check "c10d localhost:0 under mpirun -np 2: refused, nothing started" \
        test $? != 0 -a ! -s "$d/o"
    check "c10d localhost:0 under mpirun -np 2: the message names the 2 amlruns" \
        grep -q 'port 0 .* this job has 2 amlruns (OMPI_COMM_WORLD_SIZE=2)' "$d/e"
else
    skip "c10d localhost:0 under mpirun -np 2" "no mpirun"
fi
"${A[@]}" --rdzv-backend c10d --rdzv-endpoint 192.0.2.1:0 --nnodes 1 true 2>"$d/e"
expect_eq "c10d 192.0.2.1:0 (not this machine): refused (exit 2)" "$?" 2
check "c10d 192.0.2.1:0: the message says why" grep -q 'is not one of its addresses' "$d/e"
"${A[@]}" --rdzv-endpoint localhost:0 --nproc-per-node 2 sh -c "$show" >"$d/o" 2>"$d/e"
expect_eq "static localhost:0, one node: exit 0" "$?" 0
p=$(sed -n 's/^rank 0 port //p' "$d/o")
check "static localhost:0: MASTER_PORT is a real port ($p)" test "${p:-0}" -gt 0
"${A[@]}" --rdzv-endpoint localhost:x true 2>"$d/e"
expect_eq "localhost:x: refused (exit 2)" "$?" 2

# --- 29500 held by a program that listens there
"$TORCH_PY" -c 'import socket,sys,time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 29500)); s.listen(); open(sys.argv[1], "w").close()
time.sleep(600)' "$d/held" &
holder=$!
for _ in $(seq 500); do [ -e "$d/held" ] && break; sleep 0.02; done
check "port 29500 is held" test -e "$d/held"

"${A[@]}" --nproc-per-node 2 sh -c "$show" >"$d/o" 2>"$d/e"
expect_eq "29500 taken, no --master-port: the job runs (exit 0)" "$?" 0
p=$(sed -n 's/^rank 0 port //p' "$d/o")
check "29500 taken: the workers get another port ($p)" test "${p:-29500}" != 29500
expect_eq "29500 taken: both workers get the same port" "$(sed -n 's/^rank 1 port //p' "$d/o")" "$p"
expect_eq "29500 taken: said in one line, naming both ports" \
    "$(grep -c "port 29500, the default MASTER_PORT, is in use on this machine: the workers get MASTER_PORT=$p" "$d/e")" 1
"${A[@]}" -q --nproc-per-node 1 true 2>"$d/e"
expect_eq "29500 taken, -q: nothing said" "$(cat "$d/e")" ""

if have_torch; then
    "${A[@]}" --nproc-per-node 2 "$TOP/examples/ddp_train.py" >"$d/o" 2>"$d/e"
    rc=$?
    expect_eq "29500 taken: PyTorch DDP (README command 1) runs, exit 0" "$rc" 0
    [ $rc = 0 ] || tail -n 15 "$d/e" | sed 's/^/#   /'
    expect_eq "29500 taken: both DDP replicas agree" "$(grep -c 'replicas agree: True' "$d/o")" 2
    # (amlrun_ddp.sh's standalone case: this run is its DDP job on one node)
    expect_eq "29500 taken: DDP ranks 0 and 1 of 2, one checksum" \
        "$(sed -n 's|^ddp rank \([0-9]*\)/2 .*|\1|p' "$d/o" | sort -n | tr '\n' ' ')$(sed -n 's/.*checksum //p' "$d/o" | sort -u | wc -l)" \
        "0 1 1"
else
    skip "29500 taken: PyTorch DDP runs" "$TORCH_PY cannot import torch"
fi

# a port the user named is never swapped: refused, naming the way out
for how in "--master-port 29500" "--rdzv-endpoint 127.0.0.1:29500" "--standalone --master-port 29500"; do
    # shellcheck disable=SC2086
    "${A[@]}" $how --nproc-per-node 2 sh -c 'echo started' >"$d/o" 2>"$d/e"
    expect_eq "$how, taken: refused (exit 2)" "$?" 2
    expect_eq "$how, taken: no worker started" "$(cat "$d/o")" ""
    check "$how, taken: the message names the port and --master-port" \
        grep -q 'MASTER_PORT 29500 (.*) is in use on this machine.*--master-port' "$d/e"
done
MASTER_PORT=29500 "${A[@]}" --nproc-per-node 1 true 2>"$d/e"
expect_eq "MASTER_PORT=29500 in the environment, taken: refused (exit 2)" "$?" 2

"${A[@]}" --standalone --nproc-per-node 1 sh -c "$show" >"$d/o" 2>"$d/e"
expect_eq "--standalone: exit 0" "$?" 0
p=$(sed -n 's/^rank 0 port //p' "$d/o")
check "--standalone: a free port of its own ($p)" test "${p:-29500}" != 29500
expect_eq "--standalone: nothing to say about 29500" "$(grep -c 29500 "$d/e")" 0

"${A[@]}" --dry-run --nproc-per-node 1 true >"$d/o" 2>"$d/e"
check "--dry-run shows the plan, unchecked: MASTER_PORT=29500" grep -q 'MASTER_PORT=29500 ' "$d/o"

# in place: the command binds what its launcher gave, as without amlrun
if have mpirun; then
    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 timeout 60 $MPIRUN -np 1 \
        "$AMLRUN" sh -c 'echo "port $MASTER_PORT"' >"$d/o" 2>"$d/e"
    expect_eq "in place under mpirun: exit 0" "$?" 0
    check "in place under mpirun: MASTER_PORT as given (29500)" grep -qx 'port 29500' "$d/o"
    # --standalone beside other amlruns of the launcher: each would pick a
    # port of its own (the ranks' masters disagree; per node, every amlrun
    # waited for the others at its own port): refused on every rank alike.
    for how in "" "--nproc-per-node 2"; do
        # shellcheck disable=SC2086
        timeout 60 $MPIRUN -np 2 --bind-to none "$AMLRUN" --standalone $how \
            sh -c 'echo started' >"$d/o" 2>"$d/e"
        expect_eq "mpirun -np 2 amlrun --standalone $how: refused, no worker started" \
            "$(cat "$d/o")" ""
        expect_eq "mpirun -np 2 amlrun --standalone $how: both say why, naming the launcher's count" \
            "$(grep -c 'standalone makes a job of this amlrun alone.*its launcher started 2 amlruns (OMPI_COMM_WORLD_SIZE=2); leave out --standalone' "$d/e")" 2
    done
    timeout 60 $MPIRUN -np 1 "$AMLRUN" -q --standalone --nproc-per-node 2 \
        sh -c 'echo "port $MASTER_PORT"' >"$d/o" 2>"$d/e"
    expect_eq "mpirun -np 1 amlrun --standalone: one port for both workers" \
        "$(sort -u "$d/o" | wc -l)" 1
else
    skip "in place under mpirun" "no mpirun"
fi
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null || true  # its SIGTERM status is not the test's
