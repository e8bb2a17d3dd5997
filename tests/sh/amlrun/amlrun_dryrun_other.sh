#!/usr/bin/env bash
# A dry run of another machine's plan (--topology FILE, or HWLOC_XMLFILE)
# does not need the command here: it is shown as given, with that machine's
# bindings.  A real run, and a dry run of this machine, still fail early,
# with 127, as the run would.
. "$(dirname "$0")/../../lib.sh"
if [ ! -x "$AMLRUN" ]; then fail "dry run: $AMLRUN not built"; exit 0; fi
unset HWLOC_XMLFILE CUDA_VISIBLE_DEVICES OMP_NUM_THREADS
xml=$TOP/tests/topologies/azure-ndm-a100-v4.xml
cd "$TEST_TMP" || exit 1
missing=./train-$$    # nothing of that name exists here

out=$("$AMLRUN" --dry-run --topology "$xml" --nproc-per-node gpu \
    --numa-binding core-complex --report-bindings "$missing" --epochs 3 2>&1); rc=$?
expect_eq "--dry-run --topology, command absent here: exit 0" "$rc" 0
check "it says the command is not here and why that is fine" \
    grep -q "^amlrun: command: $missing: No such file or directory here, which a dry run of $xml does not need" <<<"$out"
expect_eq "8 ranks shown, each with the command as given" \
    "$(grep -c -- "-- $missing --epochs 3\$" <<<"$out")" 8
# The binding lines are that machine's: rank 2 on GPU 0003:00:00.0 (NUMA 0),
# its first L3 domain, as hwloc-calc reads the file.
l3=$(hwloc-calc --if xml -i "$xml" -I l3 numa:0 | cut -d, -f1)
want=$(hwloc-calc --if xml -i "$xml" --po -I pu "l3:$l3")
got=$(sed -n 's/^amlrun: rank 2 (local 2): gpu 2 0003:00:00.0, cpus \([0-9-]*\) .*/\1/p' <<<"$out")
expect_eq "--report-bindings shows the file's plan (rank 2: NUMA 0's first L3)" \
    "$got" "$("$TORCH_PY" -c 'import sys; v=[int(x) for x in sys.argv[1].split(",")]; print("%d-%d" % (v[0], v[-1]))' "$want")"

out=$(HWLOC_XMLFILE=$xml "$AMLRUN" --dry-run --nproc-per-node 2 train-$$ 2>&1); rc=$?
expect_eq "HWLOC_XMLFILE names the other machine just as well: exit 0" "$rc" 0
check "HWLOC_XMLFILE: the command is shown as given" grep -q -- "-- train-$$\$" <<<"$out"

# Under mpirun, in place, the same.
if have mpirun; then
    out=$($MPIRUN -np 2 "$AMLRUN" --dry-run --topology "$xml" "$missing" 2>&1); rc=$?
    expect_eq "mpirun ... amlrun --dry-run --topology (in place): exit 0" "$rc" 0
    expect_eq "in place: each process shows the command" \
        "$(grep -c -- "-- $missing\$" <<<"$out")" 2
fi

# This machine's dry run, and every real run, need the command here.
out=$("$AMLRUN" --dry-run --nproc-per-node 2 "$missing" 2>&1); rc=$?
expect_eq "--dry-run of this machine, command absent: 127, as a run" "$rc" 127
check "... with the run's message" grep -q "^amlrun: $missing: No such file or directory" <<<"$out"
out=$("$AMLRUN" --topology "$xml" --nproc-per-node 2 "$missing" 2>&1); rc=$?
expect_eq "a real run with --topology, command absent: 127 before starting" "$rc" 127
out=$(HWLOC_XMLFILE=$xml "$AMLRUN" --nproc-per-node 1 "$missing" 2>&1); rc=$?
expect_eq "a real run with HWLOC_XMLFILE, command absent: 127" "$rc" 127
# The other machine's file must still be right.
out=$("$AMLRUN" --dry-run --topology "$TEST_TMP/none.xml" --nproc-per-node 2 "$missing" 2>&1); rc=$?
expect_eq "--dry-run --topology of a missing file: a usage error (2)" "$rc" 2
# A command that is here is found as before.
out=$("$AMLRUN" --dry-run --topology "$xml" --nproc-per-node 1 true 2>&1)
check "a command that is here: found in PATH as before" \
    grep -q "^amlrun: command: true: found in PATH as " <<<"$out"
