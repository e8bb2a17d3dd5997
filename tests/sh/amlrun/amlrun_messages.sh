#!/usr/bin/env bash
# The messages a user of torchrun, mpirun or srun expects: prefixes of long
# options as torchrun's argparse takes them (held to real torchrun's own
# parser, with bench/torchrun-wrapper.py's patch), ambiguous ones refused
# with the candidates, "did you mean" with mpirun's and srun's names, a
# missing .py script caught once with 127 before any interpreter starts,
# and --version -v.
# amldist-test: slow (one of the longest: tests/run.sh starts it early)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
d=$TEST_TMP/msg
mkdir -p "$d"
unset PET_NPROC_PER_NODE PET_MAX_RESTARTS PET_MASTER_ADDR

# usage_error NAME PATTERN ARGS...: status 2, one "amlrun:" line matching PATTERN.
usage_error() {
    local name=$1 pattern=$2; shift 2
    "$AMLRUN" "$@" >/dev/null 2>"$d/err"
    expect_eq "$name: status 2" "$?" 2
    expect_eq "$name: one line" "$(grep -c '^amlrun: ' "$d/err")" 1
    check "$name: says '$pattern'" grep -qF -- "$pattern" "$d/err" ||
        diag "$(cat "$d/err")"
}
# has TEXT PATTERN: TEXT has a line matching PATTERN (grep's).
has() { grep -q -- "$2" <<<"$1"; }
# dry VAR ARGS...: VAR's value in rank 0's environment under --dry-run.
dry() {
    local var=$1; shift
    "$AMLRUN" --dry-run "$@" true 2>&1 | grep -o "\b$var=[^ ]*" | head -n 1
}

# --- prefixes of long options: the one option they begin
expect_eq "--max_restart 1: --max-restarts" "$(dry TORCHELASTIC_MAX_RESTARTS --max_restart 1 --nproc-per-node 1)" \
    TORCHELASTIC_MAX_RESTARTS=1
expect_eq "--nproc 3: --nproc-per-node" "$(dry LOCAL_WORLD_SIZE --nproc 3)" LOCAL_WORLD_SIZE=3
expect_eq "--master_a (underscores): --master-addr" \
    "$(dry MASTER_ADDR --master_a 127.0.0.9 --nproc-per-node 1)" MASTER_ADDR=127.0.0.9
expect_eq "--master-addr=127.0.0.8 spelled --master-a=...: '=' kept" \
    "$(dry MASTER_ADDR --master-a=127.0.0.8 --nproc-per-node 1)" MASTER_ADDR=127.0.0.8
expect_eq "--rdzv-i: --rdzv-id, one option with --run-id" \
    "$(dry TORCHELASTIC_RUN_ID --rdzv-i job7 --nproc-per-node 1)" TORCHELASTIC_RUN_ID=job7
out=$("$AMLRUN" --topo --topology "$TOP/tests/topologies/azure-ndm-a100-v4.xml" 2>&1)
expect_eq "--topo, a prefix of --topology, is its own option" "$?" 0
usage_error "ambiguous --ma" "ambiguous option: --ma could match --master-addr, --master-port, --max-restarts" \
    --ma 1 true
usage_error "ambiguous --host (mpirun's)" "--hostfile, --hosts (mpirun's --host is amlrun's --hosts)" \
    --host a,b true
usage_error "a flag's prefix with a value" "option --standalone takes no value" --standa=1 true
# Short options and "--" as before: -r3, and an option after -- is the command's.
expect_eq "-r3 still torchrun's -r 3" "$("$AMLRUN" --dry-run --nproc-per-node 1 -r3 true 2>&1 | grep -c 'log layout\|torchrun')" \
    "$("$AMLRUN" --dry-run --nproc-per-node 1 --redirects 3 true 2>&1 | grep -c 'log layout\|torchrun')"
out=$("$AMLRUN" --nproc-per-node 1 --no-python -- echo --max 2>&1 | no_success_line)
expect_eq "after --, --max is the command's" "$out" "--max"

# Head-node mode reads the line as the parser does: a prefix (--nproc) and
# torchrun's -r with its value stay options, the command starts at "true".
out=$("$AMLRUN" --hosts a,b --dry-run -r 3 --nproc 1 true 2>&1)
check "head node: -r 3 and --nproc passed on before the command" \
    has "$out" "amlrun -r 3 --nproc 1 --nnodes 2 true$"

# The same prefixes under real torchrun 1.13: accepted or refused alike.
# torchrun's own parser (torch.distributed.run.parse_args, after the
# wrapper's patch) reads every line in one process: argparse exits 2 on a
# refusal, and a line it takes runs `true` (0); one PyTorch import, not five.
if have_torch torch.distributed.run; then
    declare -A TR=()
    while read -r t args; do TR[$args]=$t; done < <("$TORCH_PY" - "$TOP/bench/torchrun-wrapper.py" \
        "--max_restart 1" "--nproc_per_no 1" "--ma 1" "--rdzv 1" "--stand" <<'PY' 2>/dev/null
import runpy, sys
runpy.run_path(sys.argv[1], run_name="torchrun_wrapper")  # its patch, not its main()
from torch.distributed.run import parse_args
for line in sys.argv[2:]:
    try:
        parse_args(line.split() + ["--nproc_per_node", "1", "--no_python", "true"])
        t = 0
    except SystemExit as e:
        t = e.code
    print(t, line)
PY
)
    for args in "--max_restart 1" "--nproc_per_no 1" "--ma 1" "--rdzv 1" "--stand"; do
        t=${TR[$args]:-none}
        # shellcheck disable=SC2086
        "$AMLRUN" $args --nproc-per-node 1 --master-port "$(free_port)" --no-python true >/dev/null 2>&1
        expect_eq "'$args': amlrun's status as torchrun's" "$?" "$t"
    done
else
    skip "prefixes beside torchrun" "torch.distributed.run not importable by $TORCH_PY"
fi

# --- did you mean
usage_error "mpirun's --tag-output" "mpirun's --tag-output is amlrun's --prefix" --tag-output true
usage_error "srun's --label" "srun's --label is amlrun's --prefix" --label true
usage_error "mpirun's --output-filename" "mpirun's --output-filename is amlrun's --log-dir" \
    --output-filename "$d/out" true
usage_error "mpirun's -np" "mpirun's -np is amlrun's --nproc-per-node" -np 4 true
usage_error "srun's --ntasks-per-node" "srun's --ntasks-per-node is amlrun's --nproc-per-node" \
    --ntasks-per-node 4 true
usage_error "a typo" "unknown option --nproc-per-nodes; did you mean --nproc-per-node?" \
    --nproc_per_nodes 2 true
usage_error "a typo in the middle" "did you mean --cpu-bind?" --cpu-bnid none true
"$AMLRUN" --frobnicate true 2>"$d/err"
check "a word near no option: no suggestion" sh -c "! grep -q 'did you mean' '$d/err'"

# --- a .py script that is not there: once, 127, no interpreter started
cd "$d" || exit 1
"$AMLRUN" --nproc-per-node 4 no_such_train.py --epochs 1 >"$d/out" 2>"$d/err"
expect_eq "missing .py: 127, as a missing command" "$?" 127
expect_eq "missing .py: said once" "$(grep -c 'no_such_train.py: No such file or directory' "$d/err")" 1
expect_eq "missing .py: nothing else said (no python started)" "$(cat "$d/err" "$d/out" | wc -l)" 1
"$AMLRUN" --nproc-per-node 2 --run-path missing_dir/x.py >/dev/null 2>"$d/err"
expect_eq "missing script under --run-path: 127" "$?" 127
printf 'print("ran")\n' >"$d/noexec_script"
out=$("$AMLRUN" --nproc-per-node 1 ./noexec_script 2>&1 | no_success_line)
expect_eq "a script without execute permission still runs under python" "$out" ran
out=$("$AMLRUN" --dry-run --topology "$TOP/tests/topologies/azure-ndm-a100-v4.xml" --nproc-per-node 2 \
    no_such_train.py 2>&1)
expect_eq "--dry-run of another machine: the script need not be here" "$?" 0
"$AMLRUN" --nproc-per-node 2 -m no_such_module_xyz >/dev/null 2>&1
check "-m of a missing module: python says so (not 127)" test "$?" -ne 127

# --- --version -v
"$AMLRUN" --version >"$d/v"
expect_eq "--version: one line" "$(wc -l <"$d/v")" 1
"$AMLRUN" --version -v >"$d/vv" 2>&1
expect_eq "--version -v: exit 0" "$?" 0
for name in libamldist hwloc NCCL "CUDA runtime" PMIx Slurm "Python module"; do
    check "--version -v: a '$name:' line" grep -Eq "^ *$name: (yes|no|[0-9])" "$d/vv"
done
hw=$(sed -n 's/^ *hwloc: \([0-9.]*\),.*/\1/p' "$d/vv")
if have hwloc-info; then
    expect_eq "--version -v: hwloc's version as hwloc-info's" "$hw" "$(hwloc-info --version | awk '{print $NF}')"
fi
check "--version -v: the library's file is the one amlrun loads" \
    grep -q "libamldist: .*($(readlink -f "$BUILD/lib/libamldist.so.1" | xargs dirname)\|libamldist: .*$BUILD" "$d/vv"
pmix=$(sed -n 's/^ *PMIx: yes, [^(]*(\(.*\))$/\1/p' "$d/vv")
if [ -n "$pmix" ]; then check "--version -v: PMIx's file exists" test -e "$pmix"
else check "--version -v: PMIx says why not" grep -q 'PMIx: no (' "$d/vv"; fi
out=$(AMLDIST_PMIX_LIBRARY=/nonexistent/libpmix.so "$AMLRUN" --version -v | grep 'PMIx:')
check "--version -v: PMIx as the reader would open it (AMLDIST_PMIX_LIBRARY)" \
    has "$out" 'PMIx: no'

# The Python module: what the Python amlrun runs can import.
mkdir -p "$d/py/amldist"
printf '__version__ = "9.8.7"\n' >"$d/py/amldist/__init__.py"
out=$(PYTHONPATH=$d/py "$AMLRUN" --version -v | grep 'Python module:')
check "--version -v: an importable amldist module, its version and the python" \
    has "$out" "yes, amldist 9.8.7 $d/py/amldist/__init__.py with $TORCH_PY"
out=$(PYTHONPATH=/nonexistent "$AMLRUN" --python "$TORCH_PY" -v --version | grep 'Python module:')
check "--version -v: no amldist module: no, and Python's reason" \
    has "$out" "no (.*No module named 'amldist'"
out=$(PATH=/nonexistent "$BUILD/bin/amlrun" --version -v 2>&1 | grep 'Slurm:')
check "--version -v: no srun in PATH: Slurm no" has "$out" 'Slurm: no (srun not in PATH)'

