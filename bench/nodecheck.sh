#!/usr/bin/env bash
# What the nodes' worker-count check adds to starting a two-node job: two
# per-node amlruns on loopback (node 0 and node 1 of 2, one /bin/true each),
# timed until both have exited, with the check and with --no-node-check.
# Ports come from below the kernel's ephemeral range, so that no client
# connection of another program holds the bootstrap port by chance.
# Usage: bench/nodecheck.sh [runs]   (BUILD=build by default; needs hyperfine)
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
RUNS=${1:-40}
AMLRUN=$BUILD/bin/amlrun
[ -x "$AMLRUN" ] || { echo "bench: build $AMLRUN first (make)" >&2; exit 1; }
command -v hyperfine >/dev/null || { echo "bench: needs hyperfine" >&2; exit 1; }
pair=$(mktemp /tmp/amlrun-pair.XXXXXX)
trap 'rm -f "$pair"' EXIT
cat >"$pair" <<EOS
#!/usr/bin/env bash
p=\$((20000 + RANDOM % 10000))
run() { "$AMLRUN" "\$@" --cpu-bind none --nnodes 2 --master-addr 127.0.0.1 \\
            --master-port \$p --nproc-per-node 1 /bin/true; }
run --node-rank 1 \$1 & run --node-rank 0 \$1; wait
EOS
chmod +x "$pair"
export OMP_NUM_THREADS=1
hyperfine -N --warmup 3 --runs "$RUNS" -n "with the node check" "$pair" \
    -n "without (--no-node-check)" "$pair --no-node-check"
