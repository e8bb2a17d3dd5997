#!/usr/bin/env bash
# A two-node c10d job, the same command on both "nodes" (two launchers on
# loopback, one /bin/true worker each), from start until both have exited:
# amlrun's control plane against torchrun's c10d rendezvous (Debian's
# python3-torch 1.13 through bench/torchrun-wrapper.py), in one hyperfine
# run, beside two static amlruns without a control plane (--no-node-check),
# which is what the control plane adds to.  The endpoint port is drawn below the kernel's ephemeral range.
# Usage: bench/rdzv_peers.sh [runs]   (BUILD=build by default; needs hyperfine)
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
RUNS=${1:-10}
AMLRUN=$BUILD/bin/amlrun
TORCH_PY=${TORCH_PY:-/usr/bin/python3}
[ -x "$AMLRUN" ] || { echo "bench: build $AMLRUN first (make)" >&2; exit 1; }
command -v hyperfine >/dev/null || { echo "bench: needs hyperfine" >&2; exit 1; }
pair=$(mktemp /tmp/rdzv-pair.XXXXXX)
trap 'rm -f "$pair"' EXIT
# pair LAUNCHER: two launchers of one job, started together.
cat >"$pair" <<EOS
#!/usr/bin/env bash
p=\$((20000 + RANDOM % 10000))
if [ "\$1" = amlrun ]; then
    run() { "$AMLRUN" --cpu-bind none --nnodes 2 --nproc-per-node 1 \\
                --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:\$p /bin/true; }
elif [ "\$1" = static ]; then
    run() { "$AMLRUN" --cpu-bind none --nnodes 2 --node-rank \$1 \\
                --master-addr 127.0.0.1 --master-port \$p --no-node-check \\
                --nproc-per-node 1 /bin/true; }
else
    run() { "$TORCH_PY" "$PWD/bench/torchrun-wrapper.py" --nnodes 2 \\
                --nproc_per_node 1 --rdzv_backend c10d \\
                --rdzv_endpoint 127.0.0.1:\$p --no_python /bin/true \\
                >/dev/null 2>&1; }
fi
run 1 & run 0; wait
EOS
chmod +x "$pair"
export OMP_NUM_THREADS=1
args=(-n "amlrun, c10d, 2 nodes" "$pair amlrun"
      -n "amlrun, static, 2 nodes, no control plane" "$pair static")
# (torch/distributed/run.py found on the path, not imported: the import
# alone costs a second of CPU, bench_smoke's run's largest part after the
# torchrun row itself; a torch found that does not import fails that row)
if "$TORCH_PY" -c 'import importlib.util, os, sys
s = importlib.util.find_spec("torch")
sys.exit(not (s and any(os.path.isfile(os.path.join(d, "distributed", "run.py"))
                        for d in s.submodule_search_locations or [])))' 2>/dev/null; then
    args+=(-n "torchrun, c10d, 2 nodes" "$pair torchrun")
else
    echo "bench: $TORCH_PY cannot import torch: torchrun left out" >&2
fi
# A warm-up run when there are runs to time; not at 1 run, bench_smoke's
# (does the bench still run?), where torchrun's warm-up alone costs seconds.
WARMUP=$((RUNS > 1 ? 1 : 0))
hyperfine -N --warmup "$WARMUP" --runs "$RUNS" "${args[@]}"
