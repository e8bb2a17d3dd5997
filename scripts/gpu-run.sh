#!/usr/bin/env bash
# The GPU run: on a machine with NVIDIA GPUs, record what the machine is,
# build with CUDA and NCCL, and run the NCCL paths for real, one rank per
# GPU: examples/nccl_allreduce, amldist-nccl-check, amlrun --topo beside
# nvidia-smi topo -m / -q, and --report-bindings.  The logs it writes under
# OUTDIR are kept in docs/gpu-runs/ with the date and the machine.
#
#     scripts/gpu-run.sh OUTDIR [DEPS]
#
# DEPS, optional, is a folder with hwloc's headers (include/) and libraries
# (lib/) for machines that have no hwloc and cannot install it.
set -u
out=${1:?usage: gpu-run.sh OUTDIR [DEPS]}
deps=${2:-}
mkdir -p "$out"
cd "$(dirname "$0")/.." || exit 1

# Every command is shown with its exit status; none may hang the run.
run() {
    local limit=$1
    shift
    echo
    echo "\$ $*"
    timeout -k 5 "$limit" "$@"
    echo "[exit $?]"
}

{
    run 10 date -u
    run 10 uname -a
    run 10 sh -c '. /etc/os-release; echo "$PRETTY_NAME"'
    run 10 nproc
    run 30 nvidia-smi
    run 30 nvidia-smi topo -m
    run 30 nvidia-smi --query-gpu=index,pci.bus_id,uuid,name,memory.total,memory.free --format=csv
    run 10 sh -c 'for f in /proc/driver/nvidia/gpus/*/information; do echo "$f"; cat "$f"; done'
    run 10 sh -c 'for d in /sys/bus/pci/devices/*; do [ "$(cat $d/vendor)" = 0x10de ] && echo "$d class=$(cat $d/class) numa=$(cat $d/numa_node) cpus=$(cat $d/local_cpulist)"; done'
    run 10 sh -c 'env | grep -E "^(CUDA|NVIDIA|NCCL)" | sort'
    run 10 sh -c 'lscpu | grep -Ei "model name|socket|numa|^cpu\(s\)"'
    run 10 sh -c 'ls -l /usr/local/cuda /usr/local/cuda/include/nccl.h /usr/include/nccl.h /usr/local/cuda/lib64/libcudart.so* 2>&1'
    run 60 sh -c 'find / -xdev \( -name "libnccl.so*" -o -name nccl.h \) 2>/dev/null | head -20'
    run 10 sh -c 'ldconfig -p | grep -E "hwloc|nccl|cudart|udev"'
    run 30 python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), torch.cuda.device_count())'
} >"$out/machine.txt" 2>&1
nvidia-smi -q >"$out/nvidia-smi-q.txt" 2>&1

# The build.  hwloc from DEPS when the machine has none; NCCL where the
# Makefile finds it, else PyTorch's pip copy (nvidia/nccl: include/, lib/).
export PATH="$PWD/build/bin:$PATH"
mk=(make -j"$(nproc)")
if ! pkg-config --exists hwloc 2>/dev/null && [ -n "$deps" ]; then
    mk+=(CPPFLAGS="-I$deps/include" LDFLAGS="-L$deps/lib")
    export LD_LIBRARY_PATH="$deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if [ ! -f /usr/local/cuda/include/nccl.h ] && [ ! -f /usr/include/nccl.h ]; then
    pipnccl=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)
    [ -n "$pipnccl" ] && mk+=(NCCL_HOME="$pipnccl") &&
        export LD_LIBRARY_PATH="$pipnccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
{
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
    run 300 "${mk[@]}" all
    run 10 ldd build/bin/amldist-nccl-check
} >"$out/build.txt" 2>&1

# The runs, one rank per GPU.
py=$(mktemp --suffix .py)
cat >"$py" <<'EOF'
import os, torch, torch.distributed as dist
dist.init_process_group("nccl")
r, w = dist.get_rank(), dist.get_world_size()
dev = torch.device("cuda", torch.cuda.current_device())
t = torch.ones(1, device=dev)
dist.all_reduce(t)
print(f"torch rank {r}/{w} cuda:{dev.index} {torch.cuda.get_device_name(dev)} "
      f"AMLDIST_GPU={os.environ.get('AMLDIST_GPU')} "
      f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')} "
      f"all_reduce={t.item()} affinity={sorted(os.sched_getaffinity(0))[:4]}...")
dist.destroy_process_group()
EOF
# A program that already holds NCCL under another path (PyTorch's pip copy):
# amldist_nccl_comm_init must use that copy, not load a second one.
share=$(mktemp --suffix .py)
cat >"$share" <<'EOF'
import ctypes, torch
torch.cuda.init()
lib = ctypes.CDLL("build/lib/libamldist.so.1")
lib.amldist_last_error.restype = ctypes.c_char_p
d, comm = ctypes.c_void_p(), ctypes.c_void_p()
assert lib.amldist_init(ctypes.byref(d), 0) == 0
rc = lib.amldist_nccl_comm_init(d, -1, ctypes.byref(comm), None)
ncclmaps = sorted({l.split()[-1] for l in open("/proc/self/maps") if "libnccl" in l})
print("amldist_nccl_comm_init:", rc, lib.amldist_last_error().decode(),
      "| NCCL files mapped:", ncclmaps, "| torch NCCL", torch.cuda.nccl.version())
EOF
{
    run 30 amlrun --topo
    run 30 nvidia-smi topo -m
    run 60 amlrun --nproc-per-node gpu --report-bindings --dry-run build/examples/nccl_allreduce
    run 120 env NCCL_DEBUG=INFO amlrun -v --nproc-per-node gpu --report-bindings build/examples/nccl_allreduce
    run 60 build/examples/nccl_allreduce
    run 300 amlrun --nproc-per-node gpu build/bin/amldist-nccl-check
    run 300 amlrun --nproc-per-node gpu build/bin/amldist-nccl-check -b 8 -e 8G -f 8 -n 10 -w 2
    run 300 amlrun --nproc-per-node gpu build/bin/amldist-nccl-check -C all -d all -b 1M -e 64M -f 64 -n 5 -w 1
    run 120 amlrun --nproc-per-node gpu build/bin/amldist-nccl-check -e 1G --expect-busbw 10
    run 300 amlrun --nproc-per-node gpu build/bin/amldist-nccl-check -b 16G -e 64G -n 5 -w 1 -c 0
    run 120 amlrun --nproc-per-node gpu build/bin/amldist-nccl-check -b 64G -e 64G
    run 120 amlrun --nproc-per-node gpu --report-bindings --no-python python3 "$py"
    run 120 amlrun --nproc-per-node gpu --no-python python3 "$share"
    # Neighbours: more ranks than GPUs, sharing asked for, no visible GPU, a
    # bus id that is gone.
    run 90 amlrun --nproc-per-node 2 build/examples/nccl_allreduce
    run 90 env AMLDIST_GPU_SHARE=1 amlrun --nproc-per-node 2 --gpu-bind none build/examples/nccl_allreduce
    run 30 env CUDA_VISIBLE_DEVICES= amlrun --nproc-per-node gpu build/examples/nccl_allreduce
    run 30 env CUDA_VISIBLE_DEVICES= build/bin/amldist-nccl-check
    run 60 env AMLDIST_GPU=0000:ff:00.0 build/examples/nccl_allreduce
    # A rank that cannot pick a GPU, without a launcher to kill the others:
    # rank 0 must learn it at once, not after the 300 s bootstrap timeout.
    run 60 sh -c 'j="WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29650 LOCAL_WORLD_SIZE=1 LOCAL_RANK=0"
        s=$(date +%s.%N)
        env $j RANK=1 CUDA_VISIBLE_DEVICES= build/examples/nccl_allreduce & env $j RANK=0 build/examples/nccl_allreduce; echo "rank 0 exit $?"; wait
        echo "both done after $(awk "BEGIN{print $(date +%s.%N) - $s}") s"'
    run 30 amlrun -v --nproc-per-node gpu --dry-run build/examples/nccl_allreduce
    # The per-node topology cache on a machine with a GPU: a cold run writes
    # it, a warm one imports it, and both bind exactly as live discovery does.
    run 60 sh -c 'c=$(mktemp -d); b="amlrun --nproc-per-node gpu --report-bindings --dry-run /bin/true"
        AMLDIST_TOPOLOGY_CACHE=0 $b 2>&1 | grep "^amlrun: rank" >$c.live
        AMLDIST_TOPOLOGY_CACHE=$c $b 2>&1 | grep "^amlrun: rank" >$c.cold
        AMLDIST_TOPOLOGY_CACHE=$c $b 2>&1 | grep "^amlrun: rank" >$c.warm
        cat $c.live; ls -la $c
        cmp $c.live $c.cold && cmp $c.live $c.warm && echo "cache: cold, warm and live bindings identical"
        for m in 0 $c; do s=$(date +%s%N); for i in 1 2 3 4 5 6 7 8 9 10; do AMLDIST_TOPOLOGY_CACHE=$m $b >/dev/null 2>&1; done
            echo "AMLDIST_TOPOLOGY_CACHE=$m: $(( ($(date +%s%N) - s) / 10000000 )) ms per dry run"; done
        rm -rf $c $c.live $c.cold $c.warm'
    # Two c10d "nodes" on this one machine: which GPU each binds.
    run 90 sh -c 'a="amlrun --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:29561 --report-bindings"
        $a build/examples/nccl_allreduce & $a build/examples/nccl_allreduce; echo "second exit $?"; wait $!; echo "first exit $?"'
    # The same as a static job, and a PyTorch job of two c10d nodes here.
    run 90 sh -c 'a="amlrun --nnodes 2 --nproc-per-node 1 --master-addr 127.0.0.1 --master-port 29571 --report-bindings"
        $a --node-rank 0 build/examples/nccl_allreduce & $a --node-rank 1 build/examples/nccl_allreduce; echo "second exit $?"; wait $!; echo "first exit $?"'
    run 120 sh -c 'a="amlrun --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:29581 --report-bindings --no-python python3"
        $a '"$py"' & $a '"$py"'; echo "second exit $?"; wait $!; echo "first exit $?"'
    # What was built in and is found here; the machine and a job as JSON;
    # the Python module's layout, binding and export under a real NCCL job.
    run 30 amlrun --version -v
    run 30 amlrun --topo=json
    run 60 amlrun --nproc-per-node gpu --result-json /dev/stdout build/examples/nccl_allreduce
    run 120 env PYTHONPATH=python AMLDIST_LIBRARY="$PWD/build/lib/libamldist.so.1" \
        amlrun --nproc-per-node gpu --no-python python3 -c 'import amldist, torch, torch.distributed as d
amldist.export(); d.init_process_group("nccl"); t = torch.ones(1, device="cuda"); d.all_reduce(t)
print(amldist.layout(), amldist.binding(), t.item())'
    # torchrun 2.x's console events beside amlrun's own JSON lines.
    run 60 amlrun --nproc-per-node gpu --event-log-handler console --event-log /dev/stdout build/examples/nccl_allreduce
} >"$out/runs.txt" 2>&1
rm -f "$py" "$share"
echo "gpu-run: logs in $out"
