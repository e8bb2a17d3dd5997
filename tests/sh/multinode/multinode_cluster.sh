#!/usr/bin/env bash
# The namespace test cluster itself (scripts/netns-cluster.sh) and Open MPI
# across it (scripts/ompi-rsh-agent): nodes with their own names and
# addresses, TCP between them, mpirun daemons and ranks on both nodes, an
# ssh-like environment on the remote node, and nothing left after teardown,
# also when the test that owns a cluster is interrupted or killed.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/scripts/netns-cluster.sh"
if ! cluster_up 2; then
    skip "multi-node cluster" "$NETNS_SKIP"
    exit 0
fi
T="timeout -k 5 60"

# Names and addresses.
expect_eq "node names: hostname in each node" \
    "$(on n0 hostname) $(on n1 hostname)" "n0 n1"
expect_eq "n1 resolves both nodes" "$(on n1 getent hosts n0 n1 | awk '{print $1 "=" $2}' | tr '\n' ' ')" \
    "10.231.0.10=n0 10.231.0.11=n1 "
expect_eq "a node has only lo and eth0 (no way out)" \
    "$(on n1 ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | tr '\n' ' ')" "lo eth0 "
expect_eq "a node's only routes are its subnet" "$(on n0 ip route show | awk '{print $1}')" "10.231.0.0/24"

# TCP between nodes, by name.
port=$((20000 + RANDOM % 10000))
on n1 $T "$TORCH_PY" -c "
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('n1', $port)); s.listen(1); print('ready', flush=True)
c, a = s.accept(); c.sendall(('from %s to %s' % (a[0], socket.gethostname())).encode()); c.close()
" >"$TEST_TMP/listen" &
for _ in $(seq 100); do grep -q ready "$TEST_TMP/listen" 2>/dev/null && break; sleep 0.05; done
got=$(on n0 $T "$TORCH_PY" -c "
import socket
c = socket.create_connection(('n1', $port)); print(c.recv(100).decode())")
wait
expect_eq "TCP from n0 to n1 by name" "$got" "from 10.231.0.10 to n1"

# mpirun on n0 puts daemons and ranks on both nodes, by slot and by node.
got=$(on n0 $T $MPIRUN --host n0:2,n1:2 sh -c 'echo "$OMPI_COMM_WORLD_RANK $(hostname) $OMPI_COMM_WORLD_LOCAL_RANK"' | sort -n | tr '\n' ' ')
expect_eq "mpirun --host n0:2,n1:2: ranks by slot" "$got" "0 n0 0 1 n0 1 2 n1 0 3 n1 1 "
got=$(on n0 $T $MPIRUN --host n0:2,n1:2 --map-by node sh -c 'echo "$OMPI_COMM_WORLD_RANK $(hostname)"' | sort -n | tr '\n' ' ')
expect_eq "mpirun --map-by node: ranks alternate" "$got" "0 n0 1 n1 2 n0 3 n1 "
# The remote rank really is in n1's network namespace, not only named n1.
got=$(on n0 $T $MPIRUN --host n0:1,n1:1 sh -c 'ip -o -4 addr show eth0 | awk "{print \$4}"' | sort | tr '\n' ' ')
expect_eq "each rank sees its own node's address" "$got" "10.231.0.10/24 10.231.0.11/24 "

# Like ssh, the agent gives n1 a login environment: only -x passes a variable.
export H5_MARK=from-head
got=$(on n0 $T $MPIRUN --host n0:1,n1:1 sh -c 'echo "$(hostname)=${H5_MARK:-unset}"' | sort | tr '\n' ' ')
expect_eq "remote node does not inherit the head's environment" "$got" "n0=from-head n1=unset "
got=$(on n0 $T $MPIRUN --host n0:1,n1:1 -x H5_MARK sh -c 'echo "$(hostname)=${H5_MARK:-unset}"' | sort | tr '\n' ' ')
expect_eq "mpirun -x passes a variable to the remote node" "$got" "n0=from-head n1=from-head "
unset H5_MARK

# A real MPI program talks across the nodes over the bridge (btl tcp).
if have mpicc; then
    printf '%s\n' '#include <mpi.h>' '#include <stdio.h>' \
        'int main(int c, char **v) { int r, s, x; char h[256]; int l;' \
        '  MPI_Init(&c, &v); MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &s);' \
        '  MPI_Allreduce(&r, &x, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD); MPI_Get_processor_name(h, &l);' \
        '  printf("%d %s %d/%d\n", r, h, x, s); MPI_Finalize(); return 0; }' >"$TEST_TMP/allreduce.c"
    if mpicc "$TEST_TMP/allreduce.c" -o "$TEST_TMP/allreduce"; then
        got=$(on n0 $T $MPIRUN --host n0:2,n1:2 --mca btl self,tcp "$TEST_TMP/allreduce" | sort -n | tr '\n' ' ')
        expect_eq "MPI_Allreduce across two nodes over TCP" "$got" "0 n0 6/4 1 n0 6/4 2 n1 6/4 3 n1 6/4 "
    else
        fail "mpicc builds the MPI test program"
    fi
else
    skip "MPI_Allreduce across two nodes" "no mpicc"
fi

# `kill NODE` ends every process of one node, the others live on.
on n1 sleep 300 &
on n0 sleep 300 &
for _ in $(seq 100); do
    [ -n "$(netns_pids "$CLUSTER-n1")" ] && [ -n "$(netns_pids "$CLUSTER-n0")" ] && break
    sleep 0.05
done
"$TOP/scripts/netns-cluster.sh" kill n1
# (SIGKILLed processes go when the kernel is done with them: waited for,
# 10 s at most)
for _ in $(seq 200); do
    [ -z "$("$TOP/scripts/netns-cluster.sh" pids n1)" ] && break
    sleep 0.05
done
expect_eq "kill n1: nothing left on n1" "$("$TOP/scripts/netns-cluster.sh" pids n1)" ""
check "kill n1: n0's process still runs" test -n "$("$TOP/scripts/netns-cluster.sh" pids n0)"

# Teardown removes namespaces, links, hosts files and processes.
id=$CLUSTER
cluster_down
wait 2>/dev/null
leftover() {
    local f
    for f in /run/netns/"$1"-* /etc/netns/"$1"-*; do [ -e "$f" ] && echo "$f"; done
    ip -o link show | awk -F': ' '{print $2}' | grep "^$1-"
    [ -e "$NETNS_RUNDIR/$1" ] && echo "$NETNS_RUNDIR/$1"
}
expect_eq "teardown leaves no namespace, link or state" "$(leftover "$id")" ""

# A test interrupted by SIGTERM tears its cluster down through the trap...
cat >"$TEST_TMP/owner.sh" <<EOF
. "$TOP/scripts/netns-cluster.sh"
cluster_up 2 || exit 1
echo "\$CLUSTER" >"$TEST_TMP/owner.id"
on n1 sleep 300 &
wait
EOF
bash "$TEST_TMP/owner.sh" &
owner=$!
for _ in $(seq 100); do [ -s "$TEST_TMP/owner.id" ] && break; sleep 0.05; done
id=$(cat "$TEST_TMP/owner.id")
for _ in $(seq 100); do [ -n "$(ip netns pids "$id-n1" 2>/dev/null)" ] && break; sleep 0.05; done
check "interrupted test: its node ran a process" test -n "$(ip netns pids "$id-n1" 2>/dev/null)"
kill -TERM $owner
wait $owner
expect_eq "SIGTERM to the owning test removes its cluster" "$(leftover "$id")" ""

# ... and one killed outright leaves a cluster that the next `up` reaps.
rm -f "$TEST_TMP/owner.id"
bash "$TEST_TMP/owner.sh" &
owner=$!
for _ in $(seq 100); do [ -s "$TEST_TMP/owner.id" ] && break; sleep 0.05; done
id=$(cat "$TEST_TMP/owner.id")
for _ in $(seq 100); do [ -n "$(ip netns pids "$id-n1" 2>/dev/null)" ] && break; sleep 0.05; done
kill -KILL $owner
wait $owner 2>/dev/null
check "SIGKILLed test: its cluster is still there" test -e "/run/netns/$id-n1"
"$TOP/scripts/netns-cluster.sh" reap
expect_eq "reap removes the cluster of a dead owner" "$(leftover "$id")" ""
