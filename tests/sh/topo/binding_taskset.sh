#!/usr/bin/env bash
# Binding inside a restricted cpuset: amlrun started under `taskset -c C`
# (as mpirun's default --bind-to core or a Slurm step would) keeps every
# worker inside C, warns when C is too small for its ranks and says how to
# fix it, and widens to the allowed cpus only when asked (",widen").
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
if [ ! -x "$AMLRUN" ]; then fail "taskset binding: $AMLRUN not built"; exit 0; fi
if ! have taskset; then skip "taskset binding" "taskset not installed"; exit 0; fi
unset OMP_NUM_THREADS CUDA_VISIBLE_DEVICES HWLOC_XMLFILE

mine=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)
set -- $("$TORCH_PY" -c '
import sys
for part in sys.argv[1].split(","):
    a, _, b = part.partition("-")
    print(*range(int(a), int(b or a) + 1))' "$mine" | tr '\n' ' ')
if [ $# -lt 2 ]; then skip "taskset binding" "needs 2 allowed cpus ($mine)"; exit 0; fi
first=$1; last=${!#}

probe='printf "%s %s\n" "$LOCAL_RANK" \
  "$(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"'
run() {
    out=$TEST_TMP/out; err=$TEST_TMP/err
    timeout 60 "$@" sh -c "$probe" >"$out" 2>"$err" || fail "$*: exit status"
    sort -n -o "$out" "$out"
}

run taskset -c "$last" "$AMLRUN" --nproc-per-node 1
expect_eq "taskset -c $last, 1 rank: stays on cpu $last" "$(cat "$out")" "0 $last"
check "taskset -c $last, 1 rank: no warning" test -z "$(no_success_line <"$err")"

run taskset -c "$last" "$AMLRUN" --nproc-per-node 2
expect_eq "taskset -c $last, 2 ranks: both stay on cpu $last" \
    "$(tr '\n' ' ' <"$out")" "0 $last 1 $last "
check "taskset -c $last, 2 ranks: warns and names the fix" \
    grep -q "amlrun: warning: amlrun is bound to cpus $last (1 core) but starts 2 ranks.*mpirun --bind-to none" "$err"

run taskset -c "$last" "$AMLRUN" --nproc-per-node 2 --cpu-bind none
expect_eq "taskset -c $last, --cpu-bind none: inherited as is" \
    "$(tr '\n' ' ' <"$out")" "0 $last 1 $last "

run taskset -c "$last" "$AMLRUN" --nproc-per-node 2 --cpu-bind exclusive,widen
expect_eq "taskset -c $last, exclusive,widen: one allowed core each" \
    "$(tr '\n' ' ' <"$out")" "0 $first 1 $2 "
check "widen says so" grep -q "widened to all allowed cpus $mine" "$err"

# An explicit list outside the inherited cpus is refused before any start.
if timeout 60 taskset -c "$last" "$AMLRUN" --nproc-per-node 1 \
    --cpu-bind "$first" /bin/true 2>"$err"; then
    fail "list outside the cpuset: refused"
else
    check "list outside the cpuset: refused, naming the cpus" \
        grep -q "not all among the cpus amlrun may use ($last)" "$err"
fi
