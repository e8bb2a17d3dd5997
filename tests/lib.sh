# Shared helpers for the shell tests (sourced, not run).  Each test prints
# "ok - name" or "not ok - name" lines that tests/run.sh counts; "# ..." lines
# are diagnostics.  A skipped case prints "ok - name # SKIP reason".

set -u
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
AMLRUN=$BUILD/bin/amlrun
TORCH_PY=${TORCH_PY:-/usr/bin/python3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Open MPI must not try to reach anything but loopback and our namespaces.
export OMPI_MCA_btl_tcp_if_include=${OMPI_MCA_btl_tcp_if_include:-lo}
export OMPI_MCA_oob_tcp_if_include=${OMPI_MCA_oob_tcp_if_include:-lo}
export OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader,tcp}
MPIRUN="mpirun --oversubscribe"

TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/amldist-test.XXXXXX")
trap 'rm -rf "$TEST_TMP"' EXIT

# nap SECONDS: a sleep without a process (read's timeout on a FIFO nobody
# writes, opened for the read alone, so no descriptor reaches a child).
# The helpers' polling loops forked ls, grep and sleep every 20 ms: a 5 s
# wait cost 1.5 s of CPU, taken from the programs running beside.
mkfifo "$TEST_TMP/.nap" 2>/dev/null
nap() {
    [ -p "$TEST_TMP/.nap" ] || { sleep "$1"; return 0; }
    read -r -t "$1" _ <>"$TEST_TMP/.nap" || true
}

# stdin_without_end: from here on the test's standard input is a FIFO that
# the test itself holds open for writing, so no command it starts sees its
# end.  For MPICH 4.0's mpiexec.hydra: at the end of its standard input it
# tells proxy 0 so over the proxy's socket, and when that proxy has already
# ended (a short job, mpiexec.hydra not yet scheduled again on a loaded
# machine) the write's SIGPIPE kills mpiexec.hydra before it prints a line
# of the job's output.  Seen beside other programs in hydra_layout and
# multinode_pernode_launcher; four clusters side by side, 3 busy loops
# beside, each failed within 25 jobs with /dev/null for standard input, and
# ran 40 jobs each without a failure on this.  A terminal never ends either.
stdin_without_end() {
    mkfifo "$TEST_TMP/.stdin" && exec 0<>"$TEST_TMP/.stdin"
}

# settled TRIES PAUSE COMMAND...: COMMAND's output once it prints nothing,
# asked up to TRIES times PAUSE s apart (what is still there then: the
# leftover checks, whose last processes may take a moment to end).
settled() {
    local tries=$1 pause=$2 out
    shift 2
    for _ in $(seq "$tries"); do
        out=$("$@")
        [ -z "$out" ] && break
        nap "$pause"
    done
    printf '%s' "$out"
}

# nfiles DIR REGEX: how many names in DIR match REGEX from their start
# (as `ls DIR | grep -c "^REGEX"`), in NFILES: a glob and bash's own
# matching, no process.
nfiles() {
    local f n=0
    for f in "$1"/*; do
        { [ -e "$f" ] || [ -L "$f" ]; } && [[ ${f##*/} =~ ^$2 ]] && n=$((n + 1))
    done
    NFILES=$n
}

# wait_files DIR REGEX N [SEC]: until N names in DIR match REGEX (nfiles),
# at most SEC seconds (15); 1 when they did not come.  NFILES: the count.
wait_files() {
    local deadline=$((SECONDS + ${4:-15}))
    until nfiles "$1" "$2"; [ "$NFILES" -ge "$3" ]; do
        [ "$SECONDS" -ge "$deadline" ] && return 1
        nap 0.02
    done
}

ok()   { printf 'ok - %s\n' "$*"; }
fail() { printf 'not ok - %s\n' "$*"; }
skip() { local name=$1; shift; printf 'ok - %s # SKIP %s\n' "$name" "$*"; }
diag() { printf '# %s\n' "$*"; }

# check NAME COMMAND...: one case, passing when COMMAND succeeds.
check() {
    local name=$1; shift
    if "$@"; then ok "$name"; else fail "$name"; fi
}

# expect_eq NAME GOT WANT
expect_eq() {
    if [ "$2" = "$3" ]; then ok "$1"
    else fail "$1"; diag "got:  $2"; diag "want: $3"; fi
}

have() { command -v "$1" >/dev/null 2>&1; }

# job_secret NAME: a job's secret for a test, NAME- and 32 random hex
# digits: the library refuses a secret under 32 bytes (lib/util/secret.h).
job_secret() { printf '%s-%s' "$1" "$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')"; }

# tmake ARGS...: make in the tree, one test at a time.  `make install
# PREFIX=...` rewrites the build's .pc and CMake files for that prefix, and
# a plain make puts them back: two tests' makes in one build directory at
# once (cmake.sh and install.sh, beside each other in a fresh clone's run)
# installed each other's.  The lock is the Makefile's (flock(1)).
tmake() { flock "$TOP/Makefile" make -s -C "$TOP" "$@"; }

# pmix_run OUT CMD...: CMD >OUT 2>OUT.err; and once more when a rank met
# libpmix 4.2's occasional hang in PMIx_Init (openpmix #2967: about one
# start of four ranks in fifty, beside busy programs).  libamldist bounds
# that wait and names it, which tests/unit/layout/test_layout_pmix.c checks;
# the second try runs the layout the caller checks.  CMD's status.
pmix_run() {
    local out=$1; shift
    "$@" >"$out" 2>"$out.err" && return 0
    grep -q 'openpmix #2967' "$out.err" || return 1
    diag "libpmix hung (openpmix #2967); once more: $*"
    "$@" >"$out" 2>"$out.err"
}

# have_torch [MODULE]: TORCH_PY has PyTorch (torch.distributed, or MODULE,
# a dotted name under torch), found on its path without importing it:
# `import torch` costs 1-1.5 s of CPU, and a test that asks starts the
# processes that import it anyway (a torch that is there but does not
# import fails those cases rather than skipping them).
have_torch() {
    "$TORCH_PY" - "${1:-torch.distributed}" 2>/dev/null <<'PY'
import importlib.util, os, sys
parts = sys.argv[1].split(".")
spec = importlib.util.find_spec(parts[0])
where = list(spec.submodule_search_locations or []) if spec else []
for i, part in enumerate(parts[1:], 2):
    pkgs = [os.path.join(d, part) for d in where
            if os.path.isfile(os.path.join(d, part, "__init__.py"))]
    mods = [d for d in where if os.path.isfile(os.path.join(d, part + ".py"))]
    where = pkgs or (mods if i == len(parts) else [])
sys.exit(0 if where else 1)
PY
}
