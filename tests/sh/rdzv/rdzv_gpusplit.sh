#!/usr/bin/env bash
# Several amlruns of one job on one machine (issue 22): the namespace
# "nodes" share this machine's kernel (one boot id), exactly as two c10d or
# static "nodes" tried on one workstation.  Numbering each amlrun's local
# ranks from 0 gave both GPU 0, and NCCL failed with "Duplicate GPU
# detected" (docs/gpu-runs/2026-11-25-h100-1).  The agents of one machine
# now split its GPUs as one launcher would: with enough GPUs each rank has
# its own; with too few, every rank learns that its GPU is shared and the
# library refuses before NCCL, as for one amlrun.  GPUs are those of an
# hwloc XML (--topology) and the stand-in CUDA/NCCL of tests/standin.  As
# rdzv_gpusplit@etcd, the same on etcd (the boot ids travel in the JOIN).
# amldist-test: slow
# amldist-test: etcd (also as rdzv_gpusplit@etcd: tests/amlrun/rdzv.sh's RZ_BACKEND)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/multinode.sh"
. "$TOP/tests/amlrun/rdzv.sh"
rz_setup 2
EP=$(node_addr n0)
P4D=$TOP/tests/topologies/real/aws-ofi-nccl/p4d-topology.xml
EX=$BUILD/examples/nccl_allreduce
STANDIN=$BUILD/tests/standin

# A worker that writes "HOST RANK LOCAL_RANK AMLDIST_GPU SHARED" to its
# record file.
GW=$TEST_TMP/gpu_worker.sh
cat >"$GW" <<'EOF'
#!/bin/sh
echo "$(hostname) $RANK $LOCAL_RANK ${AMLDIST_GPU:-none} ${AMLDIST_GPU_SHARED:-0}" >"$RZ_DIR/gpu.$RANK"
EOF
chmod +x "$GW"
# has_not NAME TEXT ERE: TEXT has no line matching ERE.
has_not() {
    if ! grep -qE -- "$3" <<<"$2"; then ok "$1"
    else fail "$1"; diag "$(grep -E -- "$3" <<<"$2" | head -n 3)"; fi
}
records() { cat "$RZ_DIR"/gpu.* 2>/dev/null | sort -k2,2n; }
# The distinct AMLDIST_GPU values of the records.
distinct_gpus() { records | awk '{ print $4 }' | sort -u | wc -l; }

# pair TAG PORT NPROC ARGS...: one amlrun on n0 and one on n1, the same
# line (ARGS) but --nproc-per-node NPROC, meeting by c10d at n0; waited.
pair() {
    local tag=$1 port=$2 n=$3
    shift 3
    rz_case "$tag"
    rz_start n0 --rdzv-backend c10d --rdzv-endpoint "$EP:$port" --nnodes 2 \
        --nproc-per-node "$n" --cpu-bind none "$@"
    rz_start n1 --rdzv-backend c10d --rdzv-endpoint "$EP:$port" --nnodes 2 \
        --nproc-per-node "$n" --cpu-bind none "$@"
    rz_wait n0 n1
}

# The GPUs of the XML, in CUDA's order, for the stand-in.
buses=$("$AMLRUN" --nproc-per-node 8 --cpu-bind none --topology "$P4D" --dry-run true 2>/dev/null |
    sed -n 's/.* AMLDIST_GPU=\([^ ]*\).*/\1/p' | tr '\n' , | sed 's/,$//')
expect_eq "the p4d XML has 8 GPUs" "$(tr ',' '\n' <<<"$buses" | sort -u | wc -l)" 8

# 2 amlruns x 2 ranks on an 8-GPU machine: four distinct GPUs, none shared,
# node 1's ranks after node 0's (GPUs 2 and 3 of the machine).
pair c10d2x2 "$PORT" 2 --topology "$P4D" "$GW"
expect_eq "c10d, 2 x 2 on 8 GPUs: both exit 0" "$(rz_rcs n0 n1)" "n0=0 n1=0"
expect_eq "c10d, 2 x 2 on 8 GPUs: four ranks ran" "$(records | wc -l)" 4
expect_eq "c10d, 2 x 2 on 8 GPUs: four distinct GPUs" "$(distinct_gpus)" 4
want=$(tr ',' '\n' <<<"$buses" | head -n 4 | tr '\n' ' ')
expect_eq "c10d, 2 x 2 on 8 GPUs: the machine's GPUs 0..3 in rank order" \
    "$(records | awk '{ printf "%s ", $4 }')" "$want"
expect_eq "c10d, 2 x 2 on 8 GPUs: no GPU marked shared" \
    "$(records | awk '$5 != 0' | wc -l)" 0

# The same as a static job (--nnodes 2 --node-rank N --master-addr): its
# agents meet on the same control plane (MASTER_PORT+2).
rz_case static2x2
for node in n0 n1; do
    rz_start "$node" --nnodes 2 --node-rank "${node#n}" --master-addr "$EP" \
        --master-port $((PORT + 10)) --nproc-per-node 2 --cpu-bind none \
        --topology "$P4D" "$GW"
done
rz_wait n0 n1
expect_eq "static, 2 x 2 on 8 GPUs: both exit 0" "$(rz_rcs n0 n1)" "n0=0 n1=0"
expect_eq "static, 2 x 2 on 8 GPUs: four distinct GPUs" "$(distinct_gpus)" 4

# 2 amlruns x 3 ranks on 4 GPUs (CUDA_VISIBLE_DEVICES=0,1,2,3): 6 ranks of
# the machine on 4 GPUs, as one amlrun with 6 would: GPUs 0 and 1 twice,
# those ranks marked shared, and a warning that says why.
CUDA_VISIBLE_DEVICES=0,1,2,3 pair c10d2x3 $((PORT + 20)) 3 --topology "$P4D" "$GW"
expect_eq "c10d, 2 x 3 on 4 GPUs: both exit 0" "$(rz_rcs n0 n1)" "n0=0 n1=0"
expect_eq "c10d, 2 x 3 on 4 GPUs: GPUs as ranks 0..5 of one launcher" \
    "$(records | awk '{ printf "%s:%s ", $2, $5 }')" "0:1 1:1 2:0 3:0 4:1 5:1 "
expect_eq "c10d, 2 x 3 on 4 GPUs: rank 4 on rank 0's GPU" \
    "$(records | awk '$2 == 0 || $2 == 4 { print $4 }' | sort -u | wc -l)" 1
has "c10d, 2 x 3 on 4 GPUs: the warning names the machine's ranks" \
    "$(cat "$RZ_DIR"/n*.err)" "6 ranks on 4 GPUs of this machine"

# An elastic job on 3 GPUs whose second node on the machine joins while the
# first runs: the job re-forms and the machine's GPUs are split again.  Node
# 0 alone had GPUs 0 and 1, none shared; in the new round node 1 takes GPUs
# 2 and 0, and node 0's rank 0 now shares GPU 0 with it, which node 0 must
# learn too.
EW=$TEST_TMP/elastic_worker.sh
cat >"$EW" <<'EOF'
#!/bin/sh
echo "$(hostname) $RANK $LOCAL_RANK ${AMLDIST_GPU:-none} ${AMLDIST_GPU_SHARED:-0}" >"$RZ_DIR/w$WORLD_SIZE.$RANK"
[ "$WORLD_SIZE" = 4 ] || exec sleep 60
EOF
chmod +x "$EW"
rz_case elastic
for n in n0 n1; do
    [ "$n" = n1 ] && { rz_wait_files w2. 2 || fail "elastic: node 0 runs alone first"; }
    CUDA_VISIBLE_DEVICES=0,1,2 rz_start "$n" --rdzv-backend c10d \
        --rdzv-endpoint "$EP:$((PORT + 25))" --nnodes 1:2 --nproc-per-node 2 \
        --cpu-bind none --topology "$P4D" --rdzv-conf "$RZ_FAST,last_call_timeout=0.5" "$EW"
done
rz_wait n0 n1
gpu_n() { tr ',' '\n' <<<"$buses" | sed -n "$(($1 + 1))p"; }
expect_eq "elastic, a second node joins: both exit 0" "$(rz_rcs n0 n1)" "n0=0 n1=0"
expect_eq "elastic, a second node joins: node 0 alone had GPUs 0 and 1, unshared" \
    "$(cat "$RZ_DIR"/w2.* | sort -k2,2n | awk '{ printf "%s:%s ", $4, $5 }')" \
    "$(gpu_n 0):0 $(gpu_n 1):0 "
expect_eq "elastic, a second node joins: the new round splits GPUs 0, 1, 2, 0 and marks GPU 0 on both nodes" \
    "$(cat "$RZ_DIR"/w4.* | sort -k2,2n | awk '{ printf "%s:%s ", $4, $5 }')" \
    "$(gpu_n 0):1 $(gpu_n 1):0 $(gpu_n 2):0 $(gpu_n 0):1 "

# No GPU (this machine's own topology has none): the job runs as before.
pair nogpu $((PORT + 30)) 2 "$GW"
expect_eq "no GPUs: both exit 0" "$(rz_rcs n0 n1)" "n0=0 n1=0"
expect_eq "no GPUs: four ranks ran, none given a GPU" \
    "$(records | awk '{ printf "%s:%s ", $2, $4 }')" "0:none 1:none 2:none 3:none "

if [ ! -x "$EX" ] || [ ! -e "$STANDIN/libnccl.so.2" ]; then
    skip "two amlruns over the NCCL stand-ins" "built without CUDA and NCCL headers"
    no_leftovers "gpu split"
    exit 0
fi
export LD_LIBRARY_PATH=$STANDIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FAKE_NCCL_DIR=$TEST_TMP FAKE_CUDA_DEVICES=8 FAKE_CUDA_BUSIDS=$buses

# 2 x 2 ranks of one NCCL communicator on the 8 stand-in GPUs: no rank
# shares a GPU, so NCCL's init succeeds (it failed with "Duplicate GPU
# detected" when both amlruns used GPUs 0 and 1).
pair nccl2x2 $((PORT + 40)) 2 --topology "$P4D" "$EX" -n 1
expect_eq "nccl_allreduce, 2 x 2 on 8 GPUs: both exit 0" "$(rz_rcs n0 n1)" "n0=0 n1=0"
if [ "${RC[n0]}" != 0 ]; then diag "$(tail -n 5 "$RZ_DIR"/n*.err)"; fi
has_not "nccl_allreduce, 2 x 2 on 8 GPUs: no duplicate GPU" \
    "$(cat "$RZ_DIR"/n*.err "$RZ_DIR"/n*.out)" "Duplicate GPU"

# 2 x 1 ranks on 1 GPU (CUDA_VISIBLE_DEVICES=0): the H100 case.  Both
# ranks are told their GPU is shared and refuse before NCCL, naming the
# way out, as one amlrun with 2 ranks on 1 GPU does.
CUDA_VISIBLE_DEVICES=0 pair nccl1gpu $((PORT + 50)) 1 --topology "$P4D" "$EX" -n 1
check "nccl_allreduce, 2 x 1 on 1 GPU: the job fails" test "${RC[n0]}" != 0
err=$(cat "$RZ_DIR"/n*.err "$RZ_DIR"/n*.out)
has "nccl_allreduce, 2 x 1 on 1 GPU: refused before NCCL, the GPU named as shared" \
    "$err" "AMLDIST_GPU=${buses%%,*} is shared with another rank of this node"
has "nccl_allreduce, 2 x 1 on 1 GPU: the way out is named" "$err" "AMLDIST_GPU_SHARE=1"
has_not "nccl_allreduce, 2 x 1 on 1 GPU: NCCL never saw the duplicate" "$err" "Duplicate GPU detected :"
no_leftovers "gpu split"
