#!/usr/bin/env bash
# amlrun in a container given 2 of the host's 8 GPUs: sysfs (here the p4d
# export) lists all 8, the driver's /proc/driver/nvidia/gpus only the two
# (faked through the test-only AMLDIST_TEST_NVIDIA_GPUS_DIR).  Workers are
# counted, bound and numbered over those two only.
. "$(dirname "$0")/../../lib.sh"
if [ ! -x "$AMLRUN" ]; then fail "usable GPUs: $AMLRUN not built"; exit 0; fi
unset CUDA_VISIBLE_DEVICES NVIDIA_VISIBLE_DEVICES HWLOC_XMLFILE AMLDIST_TEST_DEV_DIR
dir=${AMLDIST_TOPOLOGIES:-$TOP/tests/topologies/real}
p4d=$dir/aws-ofi-nccl/p4d-topology.xml

gpus=$TEST_TMP/gpus
for g in 0000:20:1d.0:3 0000:a0:1c.0:6; do
    busid=${g%:*} minor=${g##*:}
    mkdir -p "$gpus/$busid"
    printf 'Model: \t\t NVIDIA A100-SXM4-40GB\nGPU UUID: \t GPU-%08d-0000-0000-0000-000000000000\nBus Location: \t %s\nDevice Minor: \t %s\nGPU Excluded:\t No\n' \
        "$minor" "$busid" "$minor" >"$gpus/$busid/information"
done
export AMLDIST_TEST_NVIDIA_GPUS_DIR=$gpus

run() { # run [VAR=value ...]: a dry run of --nproc-per-node gpu on p4d
    env "$@" "$AMLRUN" --nproc-per-node gpu --dry-run --topology "$p4d" \
        --no-python true >"$TEST_TMP/out" 2>"$TEST_TMP/err"
}
gpu_of() { grep -o 'AMLDIST_GPU=[^ ]*' "$TEST_TMP/out" | cut -d= -f2 | paste -sd' '; }

run
expect_eq "--nproc-per-node gpu: one worker per usable GPU" \
    "$(grep -c '^rank ' "$TEST_TMP/out")" 2
expect_eq "AMLDIST_GPU names the usable GPUs" "$(gpu_of)" "0000:20:1d.0 0000:a0:1c.0"
check "--dry-run says how many GPUs there are and why" grep -q \
    "^amlrun: GPUs: 8 NVIDIA GPUs on the PCI bus, 2 usable by this process ($gpus lists only 0000:20:1d.0, 0000:a0:1c.0, as in a container given some GPUs)\$" \
    "$TEST_TMP/out"

# CUDA_VISIBLE_DEVICES counts the usable GPUs, as CUDA in the container does.
run CUDA_VISIBLE_DEVICES=1
expect_eq "CUDA_VISIBLE_DEVICES=1: one worker" "$(grep -c '^rank ' "$TEST_TMP/out")" 1
expect_eq "CUDA_VISIBLE_DEVICES=1: the second usable GPU, not host GPU 1" \
    "$(gpu_of)" "0000:a0:1c.0"

run NVIDIA_VISIBLE_DEVICES=none
expect_eq "NVIDIA_VISIBLE_DEVICES=none: usage error" "$?" 2
check "NVIDIA_VISIBLE_DEVICES=none: says why" grep -q \
    "^amlrun: --nproc-per-node gpu: no usable GPU: 8 NVIDIA GPUs on the PCI bus, none usable by this process (NVIDIA_VISIBLE_DEVICES=none)\$" \
    "$TEST_TMP/err"

# --nproc-per-node auto falls back to cores: no GPU variable for anyone.
env NVIDIA_VISIBLE_DEVICES=none "$AMLRUN" --nproc-per-node auto --dry-run \
    --topology "$p4d" --no-python true >"$TEST_TMP/out" 2>&1
check "NVIDIA_VISIBLE_DEVICES=none, auto: no AMLDIST_GPU" \
    sh -c "! grep -q AMLDIST_GPU= '$TEST_TMP/out'"

# --topo shows the usable GPUs only, with the driver's UUIDs, and a note.
"$AMLRUN" --topo --topology "$p4d" >"$TEST_TMP/topo" 2>"$TEST_TMP/err"
expect_eq "--topo: the usable GPUs" "$(grep -E '^GPU[0-9]+: ' "$TEST_TMP/topo")" \
"GPU0: 0000:20:1d.0  GA100 [A100 SXM4 40GB]  GPU-00000003-0000-0000-0000-000000000000
GPU1: 0000:a0:1c.0  GA100 [A100 SXM4 40GB]  GPU-00000006-0000-0000-0000-000000000000"
check "--topo: notes the GPUs this process cannot use" grep -q \
    "^Note: 8 NVIDIA GPUs on the PCI bus, 2 usable by this process" "$TEST_TMP/topo"

# Without the driver's directory every GPU on the bus counts, as before.
AMLDIST_TEST_NVIDIA_GPUS_DIR=$TEST_TMP/none run
expect_eq "no /proc/driver/nvidia/gpus: every GPU on the bus" \
    "$(grep -c '^rank ' "$TEST_TMP/out")" 8
