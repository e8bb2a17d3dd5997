#!/usr/bin/env bash
# examples/azureml/mpi-per-process.yml and mpi-per-node.yml run as Azure ML
# runs an MPI command job (tests/azureml.sh): Azure ML's mpirun from the head
# node, its variables on every process, the YAML's command unchanged.  The
# full layout of every rank at the files' own size (2 nodes x 8), then a real
# PyTorch DDP (gloo) of 2 nodes x 1 (16 torch processes would take minutes on
# this machine).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/azureml.sh"
MULTINODE_TIMEOUT=90
aml_setup

REPORT_CODE=$TEST_TMP/report
aml_report_code "$REPORT_CODE"
py=$(readlink -f "$TORCH_PY")

# --- per process: amlrun is one rank, execs python in its place -------------
aml_load "$AML_DIR/mpi-per-process.yml"
expect_eq "mpi-per-process.yml: type mpi, 8 per instance, 2 instances" \
    "$AML_TYPE $AML_K $AML_N" "mpi 8 2"
diag "command: $AML_CMD"
aml_run "$REPORT_CODE" "$TEST_TMP/pp"
expect_eq "per process: the job exits 0" "$?" 0
AML_WANT_REST="WORLD_SIZE=16 LOCAL_WORLD_SIZE=8 GROUP_WORLD_SIZE=2 MASTER_ADDR=$AML_MASTER MASTER_PORT=6105"
# shellcheck disable=SC2046
expect_eq "per process: 16 ranks, by slot, master from AZ_BATCH_MASTER_NODE" \
    "$(aml_layout "$TEST_TMP/pp")" "$(aml_want $(aml_slots 2 8))"
expect_eq "per process: every rank got the command's arguments and python" \
    "$(aml_lines "$TEST_TMP/pp" | grep -E '^n[0-9] RANK=' | sed 's/.* args=\([^ ]*\) python=\([^ ]*\) .*/\1 \2/' | sort | uniq -c | sed 's/^ *//')" \
    "16 --epochs,10 $py"
# In place: python replaced amlrun, so its parent is the shell that runs the
# command (or Open MPI's daemon, where sh -c execs its last command), never
# an amlrun.
expect_eq "per process: python runs in amlrun's place (its parent is sh or orted)" \
    "$(aml_lines "$TEST_TMP/pp" | grep -E '^n[0-9] RANK=' | sed 's/.* parent=\([^ ]*\) .*/\1/' | sed 's/^orted$/sh/' | sort | uniq -c | sed 's/^ *//')" \
    "16 sh"

# --- per node: one amlrun per node under mpirun's default binding -----------
aml_load "$AML_DIR/mpi-per-node.yml"
expect_eq "mpi-per-node.yml: type mpi, 1 per instance, 2 instances" \
    "$AML_TYPE $AML_K $AML_N" "mpi 1 2"
diag "command: $AML_CMD"
aml_run "$REPORT_CODE" "$TEST_TMP/pn"
expect_eq "per node: the job exits 0" "$?" 0
AML_WANT_REST="WORLD_SIZE=16 LOCAL_WORLD_SIZE=8 GROUP_WORLD_SIZE=2 MASTER_ADDR=$AML_MASTER MASTER_PORT=6105"
# shellcheck disable=SC2046
expect_eq "per node: 16 workers, node rank from OMPI_COMM_WORLD_RANK" \
    "$(aml_layout "$TEST_TMP/pn")" "$(aml_want $(aml_slots 2 8))"
expect_eq "per node: every worker got the command's arguments, under python3 -u" \
    "$(aml_lines "$TEST_TMP/pn" | grep -E '^n[0-9] RANK=' | sed 's/.* args=\([^ ]*\) python=\([^ ]*\) .*/\1 \2/' | sort | uniq -c | sed 's/^ *//')" \
    "16 --epochs,10 $py"
# Open MPI bound each amlrun to one core (2 processes: --bind-to core);
# ",widen" spreads the workers over every core of the node anyway.
allowed=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
expect_eq "per node: workers use every core of the node despite mpirun's binding (,widen)" \
    "$(aml_lines "$TEST_TMP/pn" | grep -E '^n0 RANK=' | sed 's/.* cpus=//' | tr ',' '\n' | sort -u |
       "$TORCH_PY" -c 'import sys
s = set()
for part in sys.stdin.read().split():
    a, _, b = part.partition("-")
    s.update(range(int(a), int(b or a) + 1))
print(",".join(map(str, sorted(s))))')" \
    "$("$TORCH_PY" -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0)))))')"
check "per node: amlrun says it widened the binding" \
    grep -q "widened to all allowed cpus $allowed" "$TEST_TMP/pn.console"

# --- PyTorch DDP (gloo), 2 nodes x 1 ------------------------------------------
# One worker a node: the layout of every rank, local ranks too, is checked
# above at the files' own size; what DDP adds is that torch's env:// takes
# these variables across nodes, which one rank a node shows as well as two
# (each torch process: a second of CPU).
if ! have_torch torch.distributed; then
    skip "Azure ML MPI jobs: DDP" "$TORCH_PY cannot import torch"
else
    DDP_CODE=$TEST_TMP/ddp
    aml_ddp_code "$DDP_CODE"
    aml_load "$AML_DIR/mpi-per-process.yml"
    aml_scale 1
    aml_run "$DDP_CODE" "$TEST_TMP/dpp" OMP_NUM_THREADS=1
    expect_eq "DDP per process (2 x 1): the job exits 0" "$?" 0
    aml_ddp_ok "DDP per process (2 x 1): replicas agree on every rank" "$TEST_TMP/dpp" 2
    aml_load "$AML_DIR/mpi-per-node.yml"
    aml_scale 1
    aml_run "$DDP_CODE" "$TEST_TMP/dpn"
    expect_eq "DDP per node (2 x 1): the job exits 0" "$?" 0
    aml_ddp_ok "DDP per node (2 x 1): replicas agree on every rank" "$TEST_TMP/dpn" 2
fi

expect_eq "no process left on any node" "$(leftovers)" ""
