#!/usr/bin/env bash
# Real PyTorch DDP (gloo, CPU) started with amldist.export() and
# init_process_group("env://"), on one host, under each launcher: amlrun
# (which sets the canonical variables and binds the ranks), mpirun and
# mpiexec.hydra running python itself (only OMPI_* or PMI_* variables: the
# module derives the rest), torchrun; and a bad environment, which raises
# amldist.LayoutError with the library's message.  Two nodes:
# python_multinode.sh (mpirun), python_slurm.sh (srun).
# amldist-test: slow (one of the longest: tests/run.sh starts it early)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/python.sh"
. "$TOP/tests/amlrun/common.sh"
stdin_without_end # mpiexec.hydra (tests/lib.sh)
py_setup
if ! py_has_torch; then
    skip "PyTorch DDP with amldist.export()" "$TORCH_PY cannot import torch"; exit 0
fi
DDP=$TOP/python/tests/ddp_export.py
host=$(hostname)

# ddp_ok NAME DIR N LAUNCHER CANONICAL BINDING: N ranks of one host, each
# with the layout the launcher gives, all agreeing and trained.
ddp_ok() {
    local name=$1 dir=$2 n=$3 launcher=$4 canonical=$5 binding=$6 want="" r got
    for ((r = 0; r < n; r++)); do
        want+="$host rank=$r/$n local=$r/$n node=0 launcher=$launcher canonical=$canonical"
        want+=" agree=True trained=True binding=$binding"$'\n'
    done
    got=$(cat "$dir"/rank.* 2>/dev/null | sort -t= -k2,2n | sed 's/ gpu=.*//')
    if [ "$got" = "${want%$'\n'}" ]; then ok "$name"
    else fail "$name"; diag "got: $got"; diag "want: $want"; sed 's/^/# /' "$dir.err" | tail -n 20; fi
}

# amlrun: the variables are there already; export() keeps them, and
# binding() is what amlrun bound each rank to.
d=$TEST_TMP/amlrun; mkdir -p "$d"
DDP_OUT=$d/rank "$AMLRUN" --nproc-per-node 2 --master-port "$(free_port)" "$DDP" >/dev/null 2>"$d.err"
expect_eq "amlrun --nproc-per-node 2 train.py: exit 0" "$?" 0
ddp_ok "amlrun --nproc-per-node 2: DDP after amldist.export(), binding from amlrun" "$d" 2 amlrun True amlrun
got=$(cat "$d"/rank.* 2>/dev/null | grep -c 'planned=True cpus_ok=True$')
expect_eq "amlrun: each rank runs on the cpus binding() names (AMLDIST_CPUS)" "$got" 2

# mpirun -np 2 amlrun train.py (amlrun in place, per process): amlrun's
# variables and binding again.
d=$TEST_TMP/inplace; mkdir -p "$d"
DDP_OUT=$d/rank MASTER_PORT=$(free_port) $MPIRUN -np 2 -x DDP_OUT -x MASTER_PORT -x PYTHONPATH \
    -x AMLDIST_LIBRARY "$AMLRUN" "$DDP" >/dev/null 2>"$d.err"
expect_eq "mpirun -np 2 amlrun train.py: exit 0" "$?" 0
ddp_ok "mpirun -np 2 amlrun: DDP after amldist.export(), binding from amlrun" "$d" 2 amlrun True amlrun

# mpirun running python itself: only OMPI_* variables (and the port).
d=$TEST_TMP/mpirun2; mkdir -p "$d"
DDP_OUT=$d/rank MASTER_PORT=$(free_port) $MPIRUN -np 2 -x DDP_OUT -x MASTER_PORT -x PYTHONPATH \
    -x AMLDIST_LIBRARY "$TORCH_PY" "$DDP" >/dev/null 2>"$d.err"
expect_eq "mpirun -np 2 python train.py: exit 0" "$?" 0
ddp_ok "mpirun -np 2 python: DDP after amldist.export() from OMPI_* alone, the plan's binding" \
    "$d" 2 ompi False plan
# Three ranks (a world that is no power of two), without PyTorch
# (python/tests/export_env.py): what export() puts in the environment is
# all init_process_group("env://") reads, and the job above shows that
# torch accepts it; three more workers importing torch would check nothing
# more (a second of CPU each).
d=$TEST_TMP/mpirun3; mkdir -p "$d"
port=$(free_port)
DDP_OUT=$d/rank MASTER_PORT=$port $MPIRUN -np 3 -x DDP_OUT -x MASTER_PORT -x PYTHONPATH \
    -x AMLDIST_LIBRARY "$TORCH_PY" "$TOP/python/tests/export_env.py" >/dev/null 2>"$d.err"
expect_eq "mpirun -np 3 python: exit 0" "$?" 0
expect_eq "mpirun -np 3 python: amldist.export() from OMPI_* alone sets what env:// reads, the plan's binding" \
    "$(cat "$d"/rank.* 2>/dev/null | sort -t= -k2,2n)" \
    "$(for r in 0 1 2; do echo "$host rank=$r/3 local=$r/3 node=0 launcher=ompi canonical=False env=$r/3 local=$r/3 master=127.0.0.1:$port binding=plan"; done)"
# MPICH's mpiexec.hydra running python itself (PMI_* and Hydra's proxy).
if have mpiexec.hydra; then
    d=$TEST_TMP/hydra; mkdir -p "$d"
    DDP_OUT=$d/rank MASTER_PORT=$(free_port) timeout -k 5 120 mpiexec.hydra -n 2 "$TORCH_PY" "$DDP" \
        >/dev/null 2>"$d.err"
    expect_eq "mpiexec.hydra -n 2 python train.py: exit 0" "$?" 0
    ddp_ok "mpiexec.hydra -n 2 python: DDP after amldist.export() from PMI_* alone" "$d" 2 mpich False plan
else
    skip "mpiexec.hydra -n 2 python: DDP after amldist.export()" "no mpiexec.hydra (Debian package mpich)"
fi
# A neighbour: mpirun without MASTER_PORT: torchrun's default port, as
# libamldist derives it (nothing listens: the layout only).
# (each rank its own file, as below: mpirun's forwarded output can
# interleave two ranks' lines)
rm -rf "$TEST_TMP/nomaster" && mkdir -p "$TEST_TMP/nomaster"
env -u MASTER_PORT $MPIRUN -np 2 -x PYTHONPATH -x AMLDIST_LIBRARY "$TORCH_PY" -c \
    'import amldist, sys; l = amldist.layout()
print(l.rank, l.master_addr, l.master_port, l.launcher, file=open("%s/%d" % (sys.argv[1], l.rank), "w"))' \
    "$TEST_TMP/nomaster" >/dev/null 2>&1
got=$(cat "$TEST_TMP/nomaster"/* 2>/dev/null | sort)
expect_eq "mpirun -np 2 without MASTER_*: master 127.0.0.1:29500 on one host" "$got" \
    "0 127.0.0.1 29500 ompi"$'\n'"1 127.0.0.1 29500 ompi"

# binding() under mpirun: each process plans for the whole node, as amlrun
# plans its workers (Open MPI's own binding of each rank to one core must
# not shrink the plan to that core).
# (amlrun's lists, "0-5,48-53", written out one cpu at a time.)
want=$("$AMLRUN" --dry-run --nproc-per-node 2 /bin/true 2>/dev/null |
    sed -n 's/^rank \([0-9]*\) .* AMLDIST_CPUS=\([^ ]*\).*/\1 \2/p' |
    while read -r r list; do
        printf '%s %s\n' "$r" "$(tr ',' '\n' <<<"$list" | while IFS=- read -r a b; do seq "$a" "${b:-$a}"; done |
            paste -sd, -)"
    done)
# Each rank writes its own file: mpirun forwards output in chunks, and two
# ranks' lines on one pipe can interleave mid-line.
rm -rf "$TEST_TMP/planned" && mkdir -p "$TEST_TMP/planned"
$MPIRUN -np 2 -x PYTHONPATH -x AMLDIST_LIBRARY "$TORCH_PY" -c '
import amldist, sys
b = amldist.binding()
r = amldist.layout().local_rank
with open("%s/%d" % (sys.argv[1], r), "w") as f:
    print(r, ",".join(map(str, b.planned_cpus or ())), b.source,
          len(b.warnings.splitlines()), "warnings", file=f)' "$TEST_TMP/planned" >/dev/null 2>&1
got=$(cat "$TEST_TMP/planned"/* 2>/dev/null | sort)
nwarn=$("$AMLRUN" --dry-run --nproc-per-node 2 /bin/true 2>&1 >/dev/null | grep -c '^amlrun: warning: ')
expect_eq "mpirun -np 2: binding().planned_cpus per local rank and the warnings as amlrun --nproc-per-node 2 plans them" \
    "$got" "$(sed "s/$/ plan $nwarn warnings/" <<<"$want")"

# torchrun (1.13, through the wrapper the tests use).
d=$TEST_TMP/torchrun; mkdir -p "$d"
DDP_OUT=$d/rank timeout 180 "$TORCH_PY" "$TOP/bench/torchrun-wrapper.py" --nproc_per_node 2 \
    --master_port "$(free_port)" "$DDP" >/dev/null 2>"$d.err"
expect_eq "torchrun --nproc_per_node 2 train.py: exit 0" "$?" 0
ddp_ok "torchrun --nproc_per_node 2: DDP after amldist.export()" "$d" 2 torchrun True plan

# A bad environment: the library's message, as a Python exception.
err=$(cd "$TEST_TMP" && RANK=x WORLD_SIZE=2 "$TORCH_PY" -c 'import amldist; amldist.export()' 2>&1 | tail -n 1)
expect_eq "RANK=x: amldist.LayoutError naming the variable" "$err" 'amldist.LayoutError: RANK="x": not a decimal integer'
err=$($MPIRUN -np 2 -x RANK=0 -x WORLD_SIZE=2 -x PYTHONPATH -x AMLDIST_LIBRARY "$TORCH_PY" -c \
    'import amldist
try:
    amldist.export()
except ValueError as e:
    print(type(e).__name__, e)' 2>&1 | sort | tail -n 1)
expect_eq "mpirun with a stale RANK=0 on every rank: the conflict, as a ValueError" "$err" \
    "LayoutError RANK=0 conflicts with OMPI_COMM_WORLD_RANK=1 (both describe a job of WORLD_SIZE=2); set AMLDIST_PREFER=canonical or launcher to choose"
