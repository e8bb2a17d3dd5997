set -u
export PATH="$PWD/build/bin:$PATH"
make -j16 all >/dev/null 2>&1 || { echo build failed; exit 1; }
run() { echo; echo "\$ ${*:2}"; timeout -k 5 "$1" "${@:2}"; echo "[exit $?]"; }
py=$(mktemp --suffix .py)
cat >"$py" <<'PY'
import os, torch, torch.distributed as dist, amldist
l = amldist.layout(); b = amldist.binding()
amldist.export()
dist.init_process_group("nccl")
t = torch.ones(1, device="cuda"); dist.all_reduce(t)
print(f"layout rank={l.rank} world={l.world_size} launcher={l.launcher} binding={b} all_reduce={t.item()}")
dist.destroy_process_group()
PY
{
run 30 amlrun --version -v
run 30 amlrun --topo=json
run 30 amlrun --topo --output "$OUT/h100-topo.svg"
run 30 amlrun --nproc-per-node gpu --dry-run=json --output "$OUT/h100-plan.png" build/examples/nccl_allreduce
run 60 amlrun --nproc-per-node gpu --result-json "$OUT/result.json" build/examples/nccl_allreduce
run 10 cat "$OUT/result.json"
run 120 env PYTHONPATH=python AMLDIST_LIBRARY=$PWD/build/lib/libamldist.so.1 amlrun --nproc-per-node gpu --no-python python3 "$py"
run 60 env PYTHONPATH=python AMLDIST_LIBRARY=$PWD/build/lib/libamldist.so.1 python3 -c 'import amldist; print(amldist.layout()); print(amldist.binding())'
} 2>&1
rm -f "$py"
