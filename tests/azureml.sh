# shellcheck shell=bash disable=SC2034,SC2086,SC2016
# Shared setup of the Azure ML tests (tests/sh/azureml/*.sh): sourced after
# lib.sh.  Runs a command job of examples/azureml/*.yml on the namespace
# cluster as Azure ML runs it on its nodes, with the YAML's `command:` taken
# from the file and run unchanged through a shell, in the job's code directory:
#
#   type: mpi      one mpirun, started on node 0 (the head node), with
#                  process_count_per_instance processes on each of
#                  instance_count nodes; every process gets the platform's
#                  AZ_BATCH_MASTER_NODE=<node 0 address>:6105 and
#                  AZ_BATCHAI_MPI_MASTER_NODE=<node 0 address> and the job's
#                  environment_variables, the rest (OMPI_*) comes from the
#                  real mpirun.  The job cannot give mpirun options: Open
#                  MPI's default binding is in force (by core for 2 processes).
#   type: pytorch  no mpirun: on each node, process_count_per_instance
#                  processes, each with MASTER_ADDR, MASTER_PORT=6105,
#                  WORLD_SIZE, NODE_RANK, RANK and LOCAL_RANK as the guide
#                  lists them (no LOCAL_WORLD_SIZE).
#
# `python` in the command is /usr/bin/python3 (the one that imports Debian's
# torch), through a directory first on PATH, as is `python3`.

. "$TOP/tests/multinode.sh"
AML_DIR=$TOP/examples/azureml
AML_PORT=6105

# aml_setup: the cluster and the tools, or "ok - ... # SKIP why" and exit 0.
aml_setup() {
    local what
    what=$(basename "$0" .sh)
    if ! "$TORCH_PY" -c 'import yaml' 2>/dev/null; then
        skip "$what" "$TORCH_PY cannot import yaml (python3-yaml) to read the job files"
        exit 0
    fi
    if ! have mpirun; then
        skip "$what" "no mpirun (Open MPI) to play Azure ML's launcher"
        exit 0
    fi
    multinode_setup 2
    AML_BIN=$TEST_TMP/bin
    mkdir -p "$AML_BIN"
    ln -s "$TORCH_PY" "$AML_BIN/python"
    ln -s "$TORCH_PY" "$AML_BIN/python3"
    export PATH=$AML_BIN:$BUILD/bin:$PATH
    AML_MASTER=$(node_addr n0)
}

# aml_get FILE FIELD: one field of a job file, as a shell word list:
#   command, type, per_instance, instances, env (NAME=VALUE lines).
aml_get() {
    "$TORCH_PY" - "$1" "$2" <<'EOF'
import sys, yaml
job = yaml.safe_load(open(sys.argv[1]))
dist = job.get("distribution") or {}
field = sys.argv[2]
if field == "command":
    print(job["command"])
elif field == "type":
    print(str(dist.get("type", "")).lower())
elif field == "per_instance":
    print(dist.get("process_count_per_instance", 1))
elif field == "instances":
    print((job.get("resources") or {}).get("instance_count", 1))
elif field == "env":
    for k, v in (job.get("environment_variables") or {}).items():
        print(f"{k}={v}")
EOF
}

# aml_load FILE: AML_CMD, AML_TYPE, AML_K (per instance), AML_N (instances),
# AML_ENV (NAME=VALUE words) from a job file.
aml_load() {
    AML_FILE=$1
    AML_CMD=$(aml_get "$1" command)
    AML_TYPE=$(aml_get "$1" type)
    AML_K=$(aml_get "$1" per_instance)
    AML_N=$(aml_get "$1" instances)
    mapfile -t AML_ENV < <(aml_get "$1" env)
}

# aml_scale K: the same job with K processes (or workers) per node instead of
# the file's count, for jobs too heavy at full size on this machine: the
# count is replaced in process_count_per_instance and in --nproc-per-node,
# nothing else.
aml_scale() {
    local k=$1
    [ "$AML_K" -gt 1 ] && AML_K=$k
    AML_CMD=$(sed -E "s/--nproc-per-node [0-9]+/--nproc-per-node $k/" <<<"$AML_CMD")
}

# aml_run CODE_DIR OUT [NAME[=VALUE]...]: run the loaded job, its code in
# CODE_DIR, with these variables too (AML_NODE_VARS: a function that prints
# NAME=VALUE words for node I, for variables that differ between nodes).
# Each rank's output goes to its own file under OUT (mpirun's
# --output-filename, or one file per process), the launcher's to OUT.console.
# Returns the job's exit status (mpirun's, or the first non-zero one).
aml_run() {
    local code=$1 out=$2
    shift 2
    rm -rf "$out" "$out.console"
    mkdir -p "$out"
    case $AML_TYPE in
        mpi) aml_run_mpi "$code" "$out" "$@" ;;
        pytorch) aml_run_pytorch "$code" "$out" "$@" ;;
        *) echo "azureml.sh: distribution type '$AML_TYPE' not reproduced" >"$out.console"; return 2 ;;
    esac
}

aml_run_mpi() {
    local code=$1 out=$2 hosts="" i v
    shift 2
    for ((i = 0; i < AML_N; i++)); do hosts+=${hosts:+,}n$i:$AML_K; done
    local xs=(-x PATH -x AZ_BATCH_MASTER_NODE -x AZ_BATCHAI_MPI_MASTER_NODE)
    for v in "${AML_ENV[@]}" "$@"; do xs+=(-x "$v"); done
    local app=(-np $((AML_N * AML_K)) --npernode "$AML_K" --host "$hosts" "${xs[@]}"
               --wdir "$code" /bin/sh -c "$AML_CMD")
    # Variables that must differ between nodes (the stand-in GPUs' bus ids):
    # one app context per node, ranks and OMPI_* as in the single form.
    if [ -n "${AML_NODE_VARS:-}" ]; then
        app=()
        for ((i = 0; i < AML_N; i++)); do
            [ $i -gt 0 ] && app+=(:)
            app+=(-np "$AML_K" --host "n$i:$AML_K" "${xs[@]}")
            for v in $("$AML_NODE_VARS" $i); do app+=(-x "$v"); done
            app+=(--wdir "$code" /bin/sh -c "$AML_CMD")
        done
    fi
    (
        export AZ_BATCH_MASTER_NODE=$AML_MASTER:$AML_PORT AZ_BATCHAI_MPI_MASTER_NODE=$AML_MASTER
        on n0 $T mpirun --output-filename "$out" "${app[@]}" >"$out.console" 2>&1
    )
}

aml_run_pytorch() {
    local code=$1 out=$2 i l rc=0 st pids=()
    shift 2
    local world=$((AML_N * AML_K))
    for ((i = 0; i < AML_N; i++)); do
        for ((l = 0; l < AML_K; l++)); do
            # A clean environment, as a process on an Azure ML node gets.
            on "n$i" $T env -i PATH="$PATH" HOME="$HOME" LANG=C.UTF-8 \
                "${AML_ENV[@]}" "$@" \
                MASTER_ADDR="$AML_MASTER" MASTER_PORT=$AML_PORT WORLD_SIZE=$world \
                NODE_RANK=$i RANK=$((i * AML_K + l)) LOCAL_RANK=$l \
                /bin/sh -c 'cd "$0" && eval "$1"' "$code" "$AML_CMD" \
                >"$out/n$i.$l" 2>&1 &
            pids+=($!)
        done
    done
    for i in "${pids[@]}"; do
        wait "$i"
        st=$?
        [ "$rc" -eq 0 ] && rc=$st
    done
    cat "$out"/n* >"$out.console"
    return "$rc"
}

# aml_lines OUT: every rank's output (all files under OUT).
aml_lines() { find "$1" -type f -exec cat {} + 2>/dev/null; }

# The report train.py: one line per worker with what torch and the program
# would see, its arguments, and who started it; needs no torch.
aml_report_code() {
    local dir=$1
    mkdir -p "$dir"
    cat >"$dir/train.py" <<'EOF'
import os, socket, sys
e = os.environ.get
try:
    parent = open(f"/proc/{os.getppid()}/comm").read().strip()
except OSError:
    parent = "?"
cpus = [l.split()[1] for l in open("/proc/self/status") if l.startswith("Cpus_allowed_list")][0]
print(f"{socket.gethostname()} RANK={e('RANK', '')} LOCAL_RANK={e('LOCAL_RANK', '')} "
      f"NODE_RANK={e('NODE_RANK', '')} WORLD_SIZE={e('WORLD_SIZE', '')} "
      f"LOCAL_WORLD_SIZE={e('LOCAL_WORLD_SIZE', '')} GROUP_WORLD_SIZE={e('GROUP_WORLD_SIZE', '')} "
      f"MASTER_ADDR={e('MASTER_ADDR', '')} MASTER_PORT={e('MASTER_PORT', '')} "
      f"args={','.join(sys.argv[1:])} python={os.path.realpath(sys.executable)} "
      f"parent={parent} cpus={cpus}", flush=True)
EOF
}

# The DDP train.py: examples/ddp_train.py (5 steps), whatever the arguments.
aml_ddp_code() {
    local dir=$1
    mkdir -p "$dir"
    cat >"$dir/train.py" <<EOF
import runpy, sys
sys.argv = ["$TOP/examples/ddp_train.py", "5"]
runpy.run_path(sys.argv[0], run_name="__main__")
EOF
}

# aml_want HOST:NODE_RANK:RANK:LOCAL_RANK... with AML_WANT_REST (the fields
# after NODE_RANK): the lines a correct job prints, in rank order.
aml_want() {
    local spec host node rank lrank
    for spec in "$@"; do
        IFS=: read -r host node rank lrank <<<"$spec"
        printf '%s RANK=%s LOCAL_RANK=%s NODE_RANK=%s %s\n' "$host" "$rank" "$lrank" "$node" "$AML_WANT_REST"
    done
}

# aml_slots N K: HOST:NODE:RANK:LOCAL specs of N nodes of K ranks, by slot.
aml_slots() {
    local i l
    for ((i = 0; i < $1; i++)); do
        for ((l = 0; l < $2; l++)); do printf 'n%s:%s:%s:%s ' "$i" "$i" $((i * $2 + l)) "$l"; done
    done
}

# aml_layout OUT: the report lines, rank order, up to MASTER_PORT.
aml_layout() {
    aml_lines "$1" | grep -E '^n[0-9] RANK=' | sed 's/ args=.*//' | sort -t= -k2,2n
}

# aml_ddp_ok NAME OUT WORLD: every rank of the DDP job reported, replicas
# agree, one checksum.
aml_ddp_ok() {
    local name=$1 out=$2 world=$3 lines
    lines=$(aml_lines "$out" | grep '^ddp rank ')
    if [ "$(grep -c "replicas agree: True" <<<"$lines")" = "$world" ] &&
       [ "$(sed 's/.*checksum //' <<<"$lines" | sort -u | wc -l)" = 1 ] &&
       [ "$(sed -E 's/^ddp rank ([0-9]+)\/.*/\1/' <<<"$lines" | sort -n | tr '\n' ' ')" = "$(seq -s ' ' 0 $((world - 1))) " ]; then
        ok "$name"
    else
        fail "$name"
        diag "got: $lines"
        tail -n 20 "$out.console" | sed 's/^/# /'
    fi
}
