#!/usr/bin/env bash
# amlrun on a stock machine (issue 38), each case the real thing:
#  - the tutorial's multi-node c10d line, --node_rank included: two amlruns
#    on loopback with different --node_rank values (and PET_NODE_RANK) meet,
#    both exit 0, the rendezvous's node ranks win, and one note names what
#    was typed;
#  - an unusable TMPDIR (a login node's per-job one, gone): the job runs,
#    its files where Python's tempfile would put them (TEMP, TMP, /tmp,
#    ...), said under -v naming TMPDIR; when no place is usable, exit 125
#    and a line saying what was tried;
#  - a version manager's shim first in PATH whose Python has no torch
#    (pyenv, conda): with no --python nor AMLRUN_PYTHON the workers get the
#    first python3 with torch (/usr/bin/python3 here), said under -v; with
#    none, PATH's first, and a line saying what was tried;
#  - the docs: the README's --topo example runs from the checkout as shown,
#    and libamldist(3)'s static CMake target links what cmake/ says.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
d=$TEST_TMP
unset AMLDIST_JOB_TOKEN AMLDIST_JOB_TOKEN_FILE AMLDIST_REQUIRE_SECRET PET_NODE_RANK
T="timeout -k 5 60"

# ---- c10d with --node_rank (torchrun ignores it) ------------------------
# c10d_pair NAME ENV0 ARG0 ENV1 ARG1: two amlruns of one c10d job, node i
# started with `env ENVi amlrun ARGi ...` (ENVi: VAR=VALUE or '-u X').
c10d_pair() {
    local name=$1 port
    port=$(free_port)
    local e0=$2 a0=$3 e1=$4 a1=$5 n
    for n in 0 1; do
        local e=e$n a=a$n
        # shellcheck disable=SC2086 # the words of ENVi and ARGi
        env ${!e} $T "$AMLRUN" --nnodes=2 ${!a} --rdzv_id=456 --rdzv_backend=c10d \
            --rdzv_endpoint="127.0.0.1:$port" --nproc_per_node=1 --cpu-bind none \
            --no-python sh -c 'echo "group=$GROUP_RANK rank=$RANK"' \
            >"$d/c$n.out" 2>"$d/c$n.err" &
        eval "pid$n=\$!"
    done
    local rc0=0 rc1=0
    wait "$pid0" || rc0=$?
    wait "$pid1" || rc1=$?
    expect_eq "$name: both nodes exit 0" "$rc0 $rc1" "0 0"
    [ "$rc0$rc1" = 00 ] || tail -3 "$d/c0.err" "$d/c1.err" | sed 's/^/# /'
    expect_eq "$name: the rendezvous gave node ranks 0 and 1" \
        "$(cat "$d/c0.out" "$d/c1.out" | grep -o 'group=[0-9]*' | sort | tr '\n' ' ')" \
        "group=0 group=1 "
}
c10d_pair "c10d, --node_rank=0 on both" "-u X" "--node_rank=0" "-u X" "--node_rank=0"
check "c10d, --node_rank: one note naming --node_rank" \
    test "$(grep -c '^amlrun: --node_rank 0: ignored: --rdzv-backend c10d assigns the node ranks' "$d/c0.err")" = 1
c10d_pair "c10d, --node_rank 1 and 0" "-u X" "--node_rank=1" "-u X" "--node-rank=0"
check "c10d, --node-rank: the note names --node-rank as typed" \
    grep -q '^amlrun: --node-rank 0: ignored' "$d/c1.err"
c10d_pair "c10d, PET_NODE_RANK" "PET_NODE_RANK=1" "" "PET_NODE_RANK=1" ""
check "c10d, PET_NODE_RANK: the note names PET_NODE_RANK" \
    grep -q '^amlrun: PET_NODE_RANK=1: ignored: --rdzv-backend c10d' "$d/c0.err"
check "c10d, PET_NODE_RANK: no --node-rank named" \
    bash -c "! grep -q -- '--node-rank' '$d/c0.err'"
rc=0
"$AMLRUN" -q --nnodes 1 --node_rank 0 --rdzv_backend c10d --rdzv_endpoint \
    "127.0.0.1:$(free_port)" --cpu-bind none --no-python true 2>"$d/q.err" || rc=$?
expect_eq "c10d, --node_rank under -q: runs, says nothing" "$rc $(cat "$d/q.err")" "0 "

# ---- an unusable TMPDIR --------------------------------------------------
rc=0
out=$(TMPDIR=/nonexistent $T "$AMLRUN" --nproc-per-node 2 --cpu-bind none --no-python \
    sh -c 'echo "rank $RANK"' 2>"$d/t.err") || rc=$?
expect_eq "TMPDIR=/nonexistent: the job runs, both workers" \
    "$rc $(echo "$out" | sort | tr '\n' ' ')" "0 rank 0 rank 1 "
check "TMPDIR=/nonexistent: nothing said without -v" \
    bash -c "! grep -q TMPDIR '$d/t.err'"
mkdir -p "$d/tmp"
rc=0
TMPDIR=/nonexistent TEMP= TMP="$d/tmp" $T "$AMLRUN" -v --nproc-per-node 1 \
    --cpu-bind none -r 3 --no-python sh -c 'echo out' >/dev/null 2>"$d/t.err" || rc=$?
expect_eq "TMPDIR=/nonexistent, TMP set: exit 0" "$rc" 0
check "TMPDIR=/nonexistent, -v: one note naming TMPDIR and where instead" \
    grep -q "^amlrun: TMPDIR=/nonexistent: No such file or directory: temporary files in $d/tmp instead" "$d/t.err"
check "TMPDIR=/nonexistent, TMP set: the redirected logs under TMP" \
    bash -c "cat '$d'/tmp/amlrun_*/*/attempt_0/0/stdout.log | grep -qx out"
if unshare -m true 2>/dev/null; then
    rc=0
    # /tmp and /var/tmp made read-only where they are (bind-mounted on
    # themselves), not covered: the build may live under /tmp (a CI's
    # clean clone), and amlrun must still be found there.
    (cd / && TMPDIR=/nonexistent unshare -m sh -c '
        for m in /tmp /var/tmp; do
            mount --bind "$m" "$m" && mount -o remount,bind,ro "$m" || exit 99
        done
        cd /tmp && exec "$1" --nproc-per-node 1 \
            --cpu-bind none --no-python sh -c "echo ran"' - "$AMLRUN") \
        >"$d/n.out" 2>"$d/n.err" || rc=$?
    expect_eq "no usable temporary directory: exit 125, no worker" \
        "$rc $(cat "$d/n.out")" "125 "
    check "no usable temporary directory: one line of what was tried, TMPDIR first" \
        grep -q '^amlrun: a private directory for the error files: no usable temporary directory (tried TMPDIR=/nonexistent (No such file or directory), /tmp (Read-only file system), /var/tmp (Read-only file system)' "$d/n.err"
    [ "$rc" = 125 ] || sed 's/^/# /' "$d/n.err"
else
    skip "no usable temporary directory" "unshare -m is not allowed here"
fi

# ---- the workers' Python: a shim without torch first in PATH --------------
real_py=$(readlink -f /usr/bin/python3 2>/dev/null)
if [ -x "$real_py" ] && have_torch; then
    mkdir -p "$d/shim"
    printf '#!/bin/sh\nexec %s -S -I "$@"\n' "$real_py" >"$d/shim/python3"
    chmod 755 "$d/shim/python3"
    printf 'import os, sys, torch\nprint("rank", os.environ["RANK"], sys.executable)\n' >"$d/tt.py"
    rc=0
    (cd "$d" && env -u AMLRUN_PYTHON -u PYTHON_EXEC PATH="$d/shim:$PATH" $T "$AMLRUN" -v \
        --nproc-per-node 2 --cpu-bind none tt.py) >"$d/py.out" 2>"$d/py.err" || rc=$?
    expect_eq "shim without torch first in PATH: the job runs under /usr/bin/python3" \
        "$rc $(sort "$d/py.out" | tr '\n' ' ')" \
        "0 rank 0 /usr/bin/python3 rank 1 /usr/bin/python3 "
    [ "$rc" = 0 ] || tail -3 "$d/py.err" | sed 's/^/# /'
    check "shim without torch: -v says which Python and why" \
        grep -q "^amlrun: command: tt.py: a .py file; runs under /usr/bin/python3 -u (the first python3 with torch; $d/shim/python3: no torch" "$d/py.err"
    rc=0
    (cd "$d" && env -u AMLRUN_PYTHON PATH="$d/shim:$PATH" $T "$AMLRUN" -q \
        --python "$d/shim/python3" --nproc-per-node 1 --cpu-bind none tt.py) \
        >/dev/null 2>"$d/py.err" || rc=$?
    check "--python names the shim: it runs, and torch is missing (exit 1)" \
        grep -q "No module named 'torch'" "$d/py.err"
    if unshare -m true 2>/dev/null; then
        # No python3 here has torch: torch's directory hidden from
        # /usr/bin/python3 too (an empty tmpfs over it).
        tdir=$(dirname "$("$real_py" -c 'import importlib.util as u; print(u.find_spec("torch").origin)')")
        rc=0
        (cd "$d" && env -u AMLRUN_PYTHON -u PYTHON_EXEC PATH="$d/shim:/usr/bin:/bin" \
            unshare -m sh -c 'mount -t tmpfs -o ro none "$1" &&
                exec "$2" --nproc-per-node 1 --cpu-bind none tt.py' - \
            "$(dirname "$tdir")" "$AMLRUN") >/dev/null 2>"$d/py.err" || rc=$?
        check "no python3 with torch: the script's import of torch said, each tried named" \
            grep -q "^amlrun: tt.py imports torch, which no python3 here has ($d/shim/python3: no torch, .*/usr/bin/python3: no torch): name the Python" "$d/py.err"
        expect_eq "no python3 with torch: PATH's first runs, and fails" "$rc" 1
    else
        skip "no python3 with torch" "unshare -m is not allowed here"
    fi
else
    skip "the workers' Python: a shim without torch" "/usr/bin/python3 has no torch"
fi

# ---- the docs: examples that run, and what the CMake target links -------------
readme=$TOP/README.md
ex=$(sed -n 's/^\$ amlrun --topo --topology \([^ ]*\)$/\1/p' "$readme" | head -1)
check "README's --topo example names a file of the repository ($ex)" \
    test -n "$ex" -a -f "$TOP/$ex"
want=$(grep -m1 "^Topology of $ex: " "$readme")
got=$(cd "$TOP" && "$AMLRUN" --topo --topology "$ex" 2>/dev/null | head -1)
expect_eq "README's --topo example: its first line as amlrun prints it" "$got" "$want"
links=$(sed -n 's/.*INTERFACE_LINK_LIBRARIES "\(.*\)")/\1/p' "$TOP/cmake/amldistConfig.cmake.in")
check "cmake/: the static target links dl and threads, no hwloc" \
    sh -c 'case "$0" in *DL_LIBS*Threads*) ! echo "$0" | grep -qi hwloc ;; *) exit 1 ;; esac' "$links"
page=$(tr '\n' ' ' <"$TOP/man/libamldist.3" | grep -o 'amldist::amldist_static links .Pa libamldist.a and with it [^:]*')
expect_eq "libamldist(3): the static target links what cmake/ says" \
    "$page" "amldist::amldist_static links .Pa libamldist.a and with it dl and threads, nothing else"
