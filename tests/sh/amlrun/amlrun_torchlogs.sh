#!/usr/bin/env bash
# torchrun's log layout: -r/--redirects and -t/--tee with --log-dir write
# <dir>/<run_id>_<x>/attempt_<n>/<local>/{stdout,stderr}.log; a redirected
# stream leaves the console, a tee'd one is in both; per-rank maps
# (0:1,1:2); every line exactly once in its file; a restart makes
# attempt_1; a private directory is kept only when it holds output; the
# tree beside real torchrun's on the same command line.
# amldist-test: slow (one of the longest: tests/run.sh starts it early)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
d=$TEST_TMP
export TMPDIR=$d/tmp
mkdir -p "$TMPDIR"
N=50000
# Worker: N numbered lines on each stream; local rank 1 exits 1 in attempt
# 0 when asked (rank 0 may be stopped before it writes: not checked).
cat >"$d/w.sh" <<'EOF'
#!/bin/sh
awk -v r="$LOCAL_RANK" -v n="$1" -v a="$TORCHELASTIC_RESTART_COUNT" 'BEGIN {
    for (i = 0; i < n; i++) { print "out " r " " i " attempt " a
                              print "err " r " " i " attempt " a > "/dev/stderr" } }'
[ "$2" = fail0 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ "$LOCAL_RANK" = 1 ] && exit 1
exit 0
EOF
chmod +x "$d/w.sh"
expected() { # LOCAL STREAM N ATTEMPT
    awk -v r="$1" -v s="$2" -v n="$3" -v a="$4" \
        'BEGIN { for (i = 0; i < n; i++) print s " " r " " i " attempt " a }'
}
A=("$AMLRUN" -q --cpu-bind none --nproc-per-node 2 --no-python)

# --- -r 3: both streams of both ranks into files, none on the console
"${A[@]}" -r 3 --log-dir "$d/l3" --run-id job "$d/w.sh" "$N" >"$d/o" 2>"$d/e"
expect_eq "-r 3: exit 0" "$?" 0
run=$(ls -d "$d"/l3/job_* 2>/dev/null)
check "-r 3: one run directory <log-dir>/job_<x>" test "$(echo "$run" | wc -w)" = 1
tree=$(cd "$run" 2>/dev/null && find . | sort | tr '\n' ' ')
expect_eq "-r 3: torchrun's tree" "$tree" \
    ". ./attempt_0 ./attempt_0/0 ./attempt_0/0/stderr.log ./attempt_0/0/stdout.log ./attempt_0/1 ./attempt_0/1/stderr.log ./attempt_0/1/stdout.log "
ok3=1
for r in 0 1; do
    cmp -s <(expected $r out $N 0) "$run/attempt_0/$r/stdout.log" || ok3=0
    cmp -s <(expected $r err $N 0) "$run/attempt_0/$r/stderr.log" || ok3=0
done
check "-r 3: every line exactly once, in order, in its rank's file" test $ok3 = 1
check "-r 3: nothing of the workers on the console" \
    test "$(grep -c '^out\|^err' "$d/o" "$d/e" | awk -F: '{s += $2} END {print s}')" = 0

# --- -r 0:1,1:2: rank 0's stdout and rank 1's stderr redirected
"${A[@]}" -r 0:1,1:2 --log-dir "$d/lm" "$d/w.sh" 100 >"$d/o" 2>"$d/e"
run=$(ls -d "$d"/lm/none_* 2>/dev/null)
files=$(cd "$run" 2>/dev/null && find . -name '*.log' | sort | tr '\n' ' ')
expect_eq "-r 0:1,1:2: only those two files" "$files" \
    "./attempt_0/0/stdout.log ./attempt_0/1/stderr.log "
expect_eq "-r 0:1,1:2: console stdout is rank 1's only" \
    "$(cut -d' ' -f1,2 "$d/o" | sort -u | tr '\n' ' ')" "out 1 "
expect_eq "-r 0:1,1:2: console stderr is rank 0's only" \
    "$(grep -v '^amlrun:' "$d/e" | cut -d' ' -f1,2 | sort -u | tr '\n' ' ')" "err 0 "

# --- -t 3 in torchrun's layout: files and the console (prefixed)
"${A[@]}" --log-layout torchrun -t 3 --log-dir "$d/lt" "$d/w.sh" 1000 >"$d/o" 2>"$d/e"
run=$(ls -d "$d"/lt/none_* 2>/dev/null)
check "-t 3: stdout.log of rank 1 has every line" \
    cmp -s <(expected 1 out 1000 0) "$run/attempt_0/1/stdout.log"
expect_eq "-t 3: every stdout line on the console too, prefixed" \
    "$(grep -c '^\[default[01]\]:out ' "$d/o")" 2000
# -r 1 -t 1: tee wins over redirect for that stream (torchrun's rule)
"${A[@]}" -r 1 -t 1 --log-dir "$d/lrt" "$d/w.sh" 10 >"$d/o" 2>"$d/e"
run=$(ls -d "$d"/lrt/none_* 2>/dev/null)
expect_eq "-r 1 -t 1: stdout in the file and on the console" \
    "$(wc -l <"$run/attempt_0/0/stdout.log") $(grep -c '^\[default0\]:out' "$d/o")" "10 10"

# --- a restart makes attempt_1 with new files
"${A[@]}" -r 3 --max-restarts 1 --log-dir "$d/lr" "$d/w.sh" 10 fail0 >"$d/o" 2>"$d/e"
expect_eq "restart: exit 0 after one restart" "$?" 0
run=$(ls -d "$d"/lr/none_* 2>/dev/null)
check "restart: attempt_0 kept, attempt_1 has its own files" \
    cmp -s <(expected 0 out 10 1) "$run/attempt_1/0/stdout.log"
check "restart: attempt_0's files (of the failed rank) are attempt 0's" \
    cmp -s <(expected 1 err 10 0) "$run/attempt_0/1/stderr.log"

# --- private directories
rm -rf "$TMPDIR"/*
"${A[@]}" "$d/w.sh" 5 >/dev/null 2>&1
expect_eq "no -r: the private run directory is removed at the end" \
    "$(ls "$TMPDIR" | wc -l)" 0
"$AMLRUN" --cpu-bind none --nproc-per-node 2 --no-python -r 3 "$d/w.sh" 5 >"$d/o" 2>"$d/e"
kept=$(sed -n "s/^amlrun: log files (torchrun's layout) in //p" "$d/e")
check "-r 3 without --log-dir: the directory is named and kept" \
    test -s "$kept/attempt_0/1/stderr.log"
case $kept in "$TMPDIR"/amlrun_*/none_*) ok "-r 3 without --log-dir: under \$TMPDIR" ;;
*) fail "-r 3 without --log-dir: under \$TMPDIR"; diag "$kept" ;; esac

# --- amlrun's own layout is unchanged; bad values are usage errors
"${A[@]}" --log-dir "$d/la" "$d/w.sh" 3 >/dev/null 2>&1
expect_eq "--log-dir alone: amlrun's rank<R>.<stream> files only" \
    "$(ls "$d/la" | tr '\n' ' ')" "rank0.stderr rank0.stdout rank1.stderr rank1.stdout "
"${A[@]}" --log-dir "$d/lar" --max-restarts 1 "$d/w.sh" 10 fail0 >/dev/null 2>&1
check "--log-dir alone with a restart: rank1.stdout keeps both attempts (open once)" \
    cmp -s <(expected 1 out 10 0; expected 1 out 10 1) "$d/lar/rank1.stdout"
expect_eq "--log-dir alone: no torchrun tree in it" "$(ls "$d/lar" | grep -c _)" 0
for bad in "-r 4" "-r 0:1,x" "--redirects 0:" "-t 9" "--log-layout x" \
           "--log-layout amlrun -r 1"; do
    # shellcheck disable=SC2086
    "$AMLRUN" $bad --nproc-per-node 1 true >/dev/null 2>"$d/e"
    expect_eq "'$bad': usage error" "$?" 2
done
"$AMLRUN" --nproc-per-node 1 -r >/dev/null 2>"$d/e"
expect_eq "-r without a value: usage error" "$?" 2

# --- beside real torchrun (Debian's 1.13 through the wrapper)
TR=$TOP/bench/torchrun-wrapper.py
if timeout 120 "$TORCH_PY" "$TR" --nproc_per_node 2 --no_python --log_dir "$d/tr" \
        -r 3 --rdzv_id job --max_restarts 1 "$d/w.sh" 10 fail0 >"$d/tro" 2>"$d/tre"; then
    "${A[@]}" --log_dir "$d/am" -r 3 --rdzv_id job --max_restarts 1 "$d/w.sh" 10 fail0 \
        >"$d/o" 2>"$d/e"
    t1=$(cd "$d"/tr/job_* && find . | sort)
    t2=$(cd "$d"/am/job_* && find . | sort)
    # torchrun has no error.json here: the sh worker writes none.
    expect_eq "same tree as torchrun -r 3 --max_restarts 1" "$t2" "$t1"
    same=1
    for f in attempt_1/0/stdout.log attempt_1/1/stderr.log attempt_0/1/stdout.log; do
        cmp -s "$(echo "$d"/tr/job_*/$f)" "$(echo "$d"/am/job_*/$f)" || same=0
    done
    check "same file contents as torchrun" test $same = 1
else
    skip "same tree as torchrun -r 3 --max_restarts 1" "torchrun did not run: $(tail -n 1 "$d/tre")"
fi
