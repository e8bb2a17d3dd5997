#!/usr/bin/env bash
# examples/azureml/pytorch-per-node.yml and pytorch-per-process.yml run as
# Azure ML runs a command job with the PyTorch distribution
# (tests/azureml.sh): no mpirun; each process gets MASTER_ADDR, MASTER_PORT,
# WORLD_SIZE, NODE_RANK, RANK and LOCAL_RANK (no LOCAL_WORLD_SIZE) and runs
# the YAML's command unchanged.  The full layout of every rank at the files'
# own size (2 nodes x 8), then a real PyTorch DDP (gloo) of 2 nodes x 1.
# amldist-test: slow (one of the longest: tests/run.sh starts it early)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/azureml.sh"
MULTINODE_TIMEOUT=90
aml_setup

REPORT_CODE=$TEST_TMP/report
aml_report_code "$REPORT_CODE"
py=$(readlink -f "$TORCH_PY")
fields() { grep -E '^n[0-9] RANK=' | sed "s/.* args=\([^ ]*\) python=\([^ ]*\) .*/\1 \2/" | sort | uniq -c | sed 's/^ *//'; }

# --- per node: WORLD_SIZE=2 NODE_RANK=i RANK=i LOCAL_RANK=0 on each node ----
aml_load "$AML_DIR/pytorch-per-node.yml"
expect_eq "pytorch-per-node.yml: type pytorch, 1 per instance, 2 instances" \
    "$AML_TYPE $AML_K $AML_N" "pytorch 1 2"
diag "command: $AML_CMD"
aml_run "$REPORT_CODE" "$TEST_TMP/pn"
expect_eq "per node: the job exits 0" "$?" 0
# The node count comes from WORLD_SIZE, the node rank from RANK = NODE_RANK;
# workers get torchrun's whole set, LOCAL_WORLD_SIZE and GROUP_WORLD_SIZE too.
AML_WANT_REST="WORLD_SIZE=16 LOCAL_WORLD_SIZE=8 GROUP_WORLD_SIZE=2 MASTER_ADDR=$AML_MASTER MASTER_PORT=6105"
# shellcheck disable=SC2046
expect_eq "per node: 16 workers, 8 per node, node rank from Azure ML's NODE_RANK" \
    "$(aml_layout "$TEST_TMP/pn")" "$(aml_want $(aml_slots 2 8))"
expect_eq "per node: every worker got the command's arguments, under python3 -u" \
    "$(aml_lines "$TEST_TMP/pn" | fields)" "16 --epochs,10 $py"

# --- per process: Azure ML starts 8 processes per node itself ---------------
aml_load "$AML_DIR/pytorch-per-process.yml"
expect_eq "pytorch-per-process.yml: type pytorch, 8 per instance, 2 instances" \
    "$AML_TYPE $AML_K $AML_N" "pytorch 8 2"
diag "command: $AML_CMD"
aml_run "$REPORT_CODE" "$TEST_TMP/pp"
expect_eq "per process: the job exits 0" "$?" 0
# In place, the variables go on as Azure ML gave them: no LOCAL_WORLD_SIZE
# is made up.
AML_WANT_REST="WORLD_SIZE=16 LOCAL_WORLD_SIZE= GROUP_WORLD_SIZE= MASTER_ADDR=$AML_MASTER MASTER_PORT=6105"
# shellcheck disable=SC2046
expect_eq "per process: 16 ranks as Azure ML numbered them, no LOCAL_WORLD_SIZE" \
    "$(aml_layout "$TEST_TMP/pp")" "$(aml_want $(aml_slots 2 8))"
expect_eq "per process: every rank got the command's arguments and python" \
    "$(aml_lines "$TEST_TMP/pp" | fields)" "16 --epochs,10 $py"
expect_eq "per process: python runs in amlrun's place (its parent is the shell)" \
    "$(aml_lines "$TEST_TMP/pp" | grep -E '^n[0-9] RANK=' | sed 's/.* parent=\([^ ]*\) .*/\1/' | sort | uniq -c | sed 's/^ *//')" \
    "16 sh"

# --- PyTorch DDP (gloo), 2 nodes x 1 ------------------------------------------
# One worker a node: the layout of every rank, local ranks too, is checked
# above at the files' own size; what DDP adds is that torch's env:// takes
# these variables across nodes, which one rank a node shows as well as two
# (each torch process: a second of CPU).
if ! have_torch torch.distributed; then
    skip "Azure ML PyTorch jobs: DDP" "$TORCH_PY cannot import torch"
else
    DDP_CODE=$TEST_TMP/ddp
    aml_ddp_code "$DDP_CODE"
    aml_load "$AML_DIR/pytorch-per-node.yml"
    aml_scale 1
    aml_run "$DDP_CODE" "$TEST_TMP/dpn"
    expect_eq "DDP per node (2 x 1): the job exits 0" "$?" 0
    aml_ddp_ok "DDP per node (2 x 1): replicas agree on every rank" "$TEST_TMP/dpn" 2
    aml_load "$AML_DIR/pytorch-per-process.yml"
    aml_scale 1
    aml_run "$DDP_CODE" "$TEST_TMP/dpp" OMP_NUM_THREADS=1
    expect_eq "DDP per process (2 x 1): the job exits 0" "$?" 0
    aml_ddp_ok "DDP per process (2 x 1): replicas agree on every rank" "$TEST_TMP/dpp" 2
fi

expect_eq "no process left on any node" "$(leftovers)" ""
