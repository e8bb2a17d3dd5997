set -u
export PATH="$PWD/build/bin:$PATH"
make -j16 all >/dev/null 2>&1 || { echo build failed; exit 1; }
run() { echo; echo "\$ $*"; timeout -k 5 "$1" "${@:2}"; echo "[exit $?]"; }
py=$(mktemp --suffix .py)
cat >"$py" <<'PY'
import os, torch, torch.distributed as dist
dist.init_process_group("nccl")
t = torch.ones(1, device="cuda"); dist.all_reduce(t)
print(f"rank {dist.get_rank()}/{dist.get_world_size()} all_reduce={t.item()} NCCL_ASYNC={os.environ.get('NCCL_ASYNC_ERROR_HANDLING')} TORCH_NCCL_ASYNC={os.environ.get('TORCH_NCCL_ASYNC_ERROR_HANDLING')}")
dist.destroy_process_group()
PY
{
run 90 sh -c 'a="amlrun --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:29561 --report-bindings"
    $a build/examples/nccl_allreduce & $a build/examples/nccl_allreduce; echo "second exit $?"; wait $!; echo "first exit $?"'
run 90 sh -c 'a="amlrun --nnodes 2 --nproc-per-node 1 --master-addr 127.0.0.1 --master-port 29571 --report-bindings"
    $a --node-rank 0 build/examples/nccl_allreduce & $a --node-rank 1 build/examples/nccl_allreduce; echo "second exit $?"; wait $!; echo "first exit $?"'
run 90 sh -c 'a="amlrun --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:29581 --report-bindings --no-python python3"
    $a '"$py"' & $a '"$py"'; echo "second exit $?"; wait $!; echo "first exit $?"'
run 120 amlrun --nproc-per-node gpu --report-bindings --no-python python3 "$py"
run 60 amlrun --nproc-per-node gpu --numa-binding core-complex --report-bindings --dry-run /bin/true
run 60 amlrun --nproc-per-node gpu --event-log-handler console --event-log /dev/stdout build/examples/nccl_allreduce
} 2>&1
rm -f "$py"
