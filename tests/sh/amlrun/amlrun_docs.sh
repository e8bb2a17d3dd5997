#!/usr/bin/env bash
# What amlrun(1), --help and examples/azureml/README.md say, held to what
# amlrun does: the short options the page lists are the parser's and each
# is accepted; the Azure ML jobs' train.py arguments run with
# examples/ddp_train.py, which the README says runs unchanged; SIGUSR1 to
# amlrun kills a Python worker that does not catch it, with the status the
# page gives; every status --topo exits with is listed under EXIT STATUS.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
page=$TOP/man/amlrun.1
d=$TEST_TMP/docs
mkdir -p "$d"
unset PET_NPROC_PER_NODE HWLOC_XMLFILE
xml=$TOP/tests/topologies/azure-ndm-a100-v4.xml

# The statuses listed under EXIT STATUS (".It 2", ".It 125", ...).
listed=$(sed -n '/^\.Sh EXIT STATUS/,/^\.Sh /p' "$page" | sed -n 's/^\.It \([0-9][0-9]*\)$/\1/p' | sort -n | tr '\n' ' ')
diag "EXIT STATUS lists: $listed"
is_listed() { case " $listed " in *" $1 "*) return 0 ;; esac; return 1; }

# --- short options: the page's, --help's and the parser's are one set
from_page=$(sed -n 's/^\.It Fl \([a-zA-Z]\) ,.*/-\1/p' "$page" | sort -u | tr '\n' ' ')
from_help=$("$AMLRUN" --help | grep -oE '^  -[a-zA-Z],' | tr -d ' ,' | sort -u | tr '\n' ' ')
from_table=$("$AMLRUN" --complete-spec | awk -F '\t' '$1 == "short" {print "-" $2}' | sort -u | tr '\n' ' ')
expect_eq "amlrun.1 lists the short options --help lists" "$from_page" "$from_help"
expect_eq "and those are the option table's" "$from_table" "$from_help"
for s in $from_table; do
    long=$("$AMLRUN" --complete-spec | awk -F '\t' -v c="${s#-}" '$1 == "short" && $2 == c {print $3}')
    arg=$("$AMLRUN" --complete-spec | awk -F '\t' -v n="$long" '$1 == "long" && $2 == n {print $3}')
    if [ "$arg" = required ]; then a=("$s" 3); else a=("$s"); fi
    "$AMLRUN" --dry-run --topology "$xml" --nproc-per-node 1 "${a[@]}" true >/dev/null 2>"$d/err"
    expect_eq "amlrun.1's ${a[*]} (--$long) is accepted" "$?" 0
done
check "amlrun.1 no longer says torchrun's -r is refused" \
    sh -c "! tr '\n' ' ' <'$page' | grep -q 'except its redirection of output'"

# --- examples/azureml: the jobs' command lines with examples/ddp_train.py
claim=$(tr '\n' ' ' <"$TOP/examples/azureml/README.md" | grep -c 'examples/ddp_train.py.*runs unchanged in all four training jobs')
expect_eq "the README says ddp_train.py runs unchanged in the jobs" "$claim" 1
# The jobs that give the same arguments share one run (four PyTorch
# processes fewer for each repeat).
declare -A ran_rc=() ran_out=()
for yml in "$TOP"/examples/azureml/*.yml; do
    line=$(sed -n 's/^command: *//p' "$yml")
    case $line in *train.py*) ;; *) continue ;; esac
    args=${line#*train.py}
    if [ -z "${ran_rc[x$args]+set}" ]; then
        # One node of two workers stands for the job: the script and its
        # arguments are what is checked.
        # shellcheck disable=SC2086
        ran_out[x$args]=$("$AMLRUN" --nproc-per-node 2 --master-port "$(free_port)" \
            --cpu-bind none "$TOP/examples/ddp_train.py" $args 2>&1)
        ran_rc[x$args]=$?
    fi
    rc=${ran_rc[x$args]}
    expect_eq "$(basename "$yml"): ddp_train.py$args runs (exit 0)" "$rc" 0
    [ "$rc" = 0 ] || diag "$(tail -3 <<<"${ran_out[x$args]}")"
done

# --- SIGUSR1: a Python worker without a handler dies of it
page_status=$(tr '\n' ' ' <"$page" | grep -oE '\(([0-9]+) for \.Dv SIGUSR1 \)' | grep -oE '[0-9]+' | head -n 1)
check "amlrun.1 gives the status of a job whose workers die of SIGUSR1" test -n "$page_status"
printf 'import os, sys, time\nopen(os.path.join(sys.argv[1], "ready." + os.environ["RANK"]), "w").close()\ntime.sleep(60)\n' \
    >"$d/sleeper.py"
"$AMLRUN" --nproc-per-node 2 "$d/sleeper.py" "$d" >"$d/out" 2>"$d/err" &
pid=$!
if wait_for 2 30 "$d" ready.; then
    kill -USR1 "$pid"
    wait "$pid"
    rc=$?
    expect_eq "SIGUSR1 to amlrun: the default Python workers die, status as amlrun.1 says" "$rc" "$page_status"
    check "and amlrun names the signal" grep -q 'SIGUSR1' "$d/err"
    check "that status is listed under EXIT STATUS (128+n)" grep -q '^\.It 128+ Ns Ar n' "$page"
else
    kill "$pid"; wait "$pid"
    fail "SIGUSR1: the workers did not start"
fi

# --- --topo's statuses are listed
"$AMLRUN" --topo --topology "$xml" >/dev/null 2>&1
expect_eq "--topo of a loadable XML: 0" "$?" 0
"$AMLRUN" --topo --topology "$d/none.xml" >/dev/null 2>"$d/err"
rc=$?
check "--topo of a missing XML: its status ($rc) is listed under EXIT STATUS" is_listed "$rc"
expect_eq "--topo of a missing XML: a usage error, as a run's --topology" "$rc" \
    "$("$AMLRUN" --dry-run --topology "$d/none.xml" --nproc-per-node 1 true >/dev/null 2>&1; echo $?)"
printf '<?xml version="1.0"?>\n<topology>broken\n' >"$d/bad.xml"
"$AMLRUN" --topo --topology "$d/bad.xml" >/dev/null 2>&1
rc=$?
check "--topo of a malformed XML: its status ($rc) is listed under EXIT STATUS" is_listed "$rc"
