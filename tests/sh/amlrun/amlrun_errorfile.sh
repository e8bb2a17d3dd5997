#!/usr/bin/env bash
# TORCHELASTIC_ERROR_FILE and the root cause: each worker gets its own error
# file (torchrun's attempt_<n>/<local>/error.json), TORCHELASTIC_USE_AGENT_STORE
# is False; a PyTorch script with @record raising ValueError on rank 1 gets
# a summary naming the rank, ValueError, its message and traceback line,
# beside real torchrun's; a worker killed by a signal, a malformed, huge or
# FIFO error file are summarised without a crash or a hang; amlrun's own
# TORCHELASTIC_ERROR_FILE gets the root cause with errorCode; the private
# directory is removed, unless the summary names an error file in it.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
d=$TEST_TMP
export TMPDIR=$d/tmp
mkdir -p "$TMPDIR"
A=("$AMLRUN" -q --cpu-bind none --nproc-per-node 2)

# --- the variables each worker sees
"${A[@]}" --no-python sh -c 'echo "$LOCAL_RANK $TORCHELASTIC_ERROR_FILE $TORCHELASTIC_USE_AGENT_STORE"' \
    >"$d/o" 2>&1
f0=$(awk '$1 == 0 {print $2}' "$d/o")
f1=$(awk '$1 == 1 {print $2}' "$d/o")
case $f0 in "$TMPDIR"/amlrun_*/none_*/attempt_0/0/error.json) ok "rank 0: its own error file, torchrun's path" ;;
*) fail "rank 0: its own error file, torchrun's path"; diag "$f0" ;; esac
expect_eq "rank 1: the same run directory, its local rank" "$f1" "${f0%/0/error.json}/1/error.json"
expect_eq "TORCHELASTIC_USE_AGENT_STORE=False in every worker" \
    "$(awk '{print $3}' "$d/o" | sort -u)" False
expect_eq "the private directory is gone after the job" "$(ls "$TMPDIR" | wc -l)" 0
TORCHELASTIC_ERROR_FILE=/nonexistent/x "${A[@]}" --no-python sh -c 'echo "$TORCHELASTIC_ERROR_FILE"' >"$d/o" 2>&1
check "a TORCHELASTIC_ERROR_FILE of amlrun's own is not the workers' (torchrun's rule)" \
    test "$(grep -c /nonexistent "$d/o")" = 0

# --- @record, ValueError on rank 1
# (rank 0 only outlives rank 1 until it is stopped: it imports no torch,
# a second of CPU under amlrun and under torchrun each)
cat >"$d/fail.py" <<'EOF'
import os, time
if os.environ["RANK"] != "1":
    time.sleep(60)
    raise SystemExit(0)
from torch.distributed.elastic.multiprocessing.errors import record

@record
def main():
    rank = int(os.environ["RANK"])
    if rank == 1:
        raise ValueError(f"rank {rank} refuses: bad value 42")
    time.sleep(60)

if __name__ == "__main__":
    main()
EOF
TORCHELASTIC_ERROR_FILE=$d/parent.json "${A[@]}" --python "$TORCH_PY" "$d/fail.py" >"$d/o" 2>"$d/e"
expect_eq "@record ValueError: job exits 1" "$?" 1
sed -n '/root cause/,$p' "$d/e" | sed 's/^/#   /'
check "summary: root cause block" grep -q '^amlrun: root cause (first observed failure):$' "$d/e"
check "summary: rank 1, local rank 1" grep -q '^amlrun:   rank      : 1 (local_rank: 1)$' "$d/e"
check "summary: exit code 1 and pid" grep -Eq '^amlrun:   exitcode  : 1 \(pid: [0-9]+\)$' "$d/e"
check "summary: host" grep -q "^amlrun:   host      : $(hostname)\$" "$d/e"
check "summary: time" grep -Eq '^amlrun:   time      : [0-9]{4}-[0-9]{2}-[0-9]{2}_[0-9:]{8}$' "$d/e"
check "summary: ValueError and its message" \
    grep -q '^amlrun:   message   : ValueError: rank 1 refuses: bad value 42$' "$d/e"
check "summary: the traceback's line" \
    grep -q 'raise ValueError(f"rank {rank} refuses: bad value 42")' <(sed -n '/traceback :/,$p' "$d/e")
check "summary: the error file of attempt_0/1" grep -q 'error_file: .*/attempt_0/1/error.json$' "$d/e"
ef=$(sed -n 's/^amlrun:   error_file: //p' "$d/e")
check "summary: the error file it names is still there to read" test -s "$ef"
check "amlrun's own TORCHELASTIC_ERROR_FILE: the root cause with errorCode 1" \
    "$TORCH_PY" -c 'import json,sys; m=json.load(open(sys.argv[1]))["message"]
assert m["errorCode"] == 1 and m["message"].startswith("ValueError: rank 1"), m
assert "raise ValueError" in m["extraInfo"]["py_callstack"]' "$d/parent.json"

# beside real torchrun's summary of the same script
TR=$TOP/bench/torchrun-wrapper.py
timeout 120 "$TORCH_PY" "$TR" --nproc_per_node 2 "$d/fail.py" >"$d/tro" 2>"$d/tre"
if grep -q 'Root Cause (first observed failure)' "$d/tre"; then
    sed -n '/Root Cause/,$p' "$d/tre" | sed 's/^/#   torchrun: /'
    tr_rank=$(sed -n '/Root Cause/,$s/^  rank      : //p' "$d/tre")
    am_rank=$(sed -n 's/^amlrun:   rank      : //p' "$d/e")
    expect_eq "rank line as torchrun's" "$am_rank" "$tr_rank"
    tr_code=$(sed -n '/Root Cause/,$s/^  exitcode  : \([-0-9]*\) .*/\1/p' "$d/tre")
    am_code=$(sed -n 's/^amlrun:   exitcode  : \([-0-9]*\) .*/\1/p' "$d/e")
    expect_eq "exit code as torchrun's" "$am_code" "$tr_code"
    check "torchrun's last traceback line is in amlrun's summary" \
        grep -qF "$(sed -n '/Root Cause/,$p' "$d/tre" | grep -m1 '^  ValueError:' | sed 's/^ *//')" "$d/e"
else
    skip "rank line as torchrun's" "torchrun did not run: $(tail -n 1 "$d/tre")"
fi

# --- a worker killed by a signal: no error file
"${A[@]}" --no-python sh -c '[ "$LOCAL_RANK" = 1 ] && kill -9 $$; sleep 60' >"$d/o" 2>"$d/e"
expect_eq "SIGKILL: job exits 137" "$?" 137
check "SIGKILL: exit code -9 and the signal named" \
    grep -Eq '^amlrun:   exitcode  : -9 \(pid: [0-9]+\): killed by signal 9 \(SIGKILL\)$' "$d/e"
check "SIGKILL: torchrun's message" \
    grep -Eq '^amlrun:   message   : Signal 9 \(SIGKILL\) received by PID [0-9]+$' "$d/e"
# As torchrun 1.13 says: a file never written is not named (its directory
# is gone with the run's by the time anyone reads the summary).
check "SIGKILL: the error file, never written, is not named" \
    grep -q '^amlrun:   error_file: <N/A>$' "$d/e"
check "SIGKILL: no path to a file that does not exist" \
    sh -c '! grep -q "error.json" "$1"' sh "$d/e"

# --- no @record: no error file is written, none is named, as torchrun says
cat >"$d/norecord.py" <<'EOF'
import os, time
if os.environ["RANK"] == "1":
    raise ValueError("rank 1 refuses without @record")
time.sleep(60)
EOF
before=$(ls "$TMPDIR" | wc -l)
"${A[@]}" --python "$TORCH_PY" "$d/norecord.py" >"$d/o" 2>"$d/e"
expect_eq "no @record: job exits 1" "$?" 1
expect_eq "no @record: the private directory is gone after the job" "$(ls "$TMPDIR" | wc -l)" "$before"
am_ef=$(sed -n 's/^amlrun:   error_file: //p' "$d/e")
expect_eq "no @record: the error file is <N/A>" "$am_ef" "<N/A>"
timeout 120 "$TORCH_PY" "$TR" --nproc_per_node 2 "$d/norecord.py" >"$d/tro" 2>"$d/tre"
if grep -q 'Root Cause (first observed failure)' "$d/tre"; then
    expect_eq "no @record: error_file as torchrun's" "$am_ef" \
        "$(sed -n '/Root Cause/,$s/^  error_file: //p' "$d/tre")"
else
    skip "no @record: error_file as torchrun's" "torchrun did not run: $(tail -n 1 "$d/tre")"
fi

expect_eq "no @record, a Python worker: the hint to decorate its entry point" \
    "$(sed -n 's/^amlrun:   message   : //p' "$d/e")" \
    "<N/A> (for the exception and its traceback, decorate the entry point with torch.distributed.elastic.multiprocessing.errors.record)"

# --- torchrun's @record hint is for Python workers only (issue 38): a C
# program or a shell script has no entry point to decorate; a Python
# interpreter named as the command (--no-python python3 -c) is Python.
# message_of CMD...: "STATUS:MESSAGE" of a job whose local rank 1 fails
# with 3, MESSAGE the root cause's message line.
message_of() {
    local rc=0
    timeout 60 "${A[@]}" "$@" >"$d/o" 2>"$d/e" || rc=$?
    echo "$rc:$(sed -n 's/^amlrun:   message   : //p' "$d/e")"
}
hint="<N/A> (for the exception and its traceback, decorate the entry point with torch.distributed.elastic.multiprocessing.errors.record)"
expect_eq "a native worker (sh) failing: message <N/A>, no @record hint" \
    "$(message_of --no-python sh -c '[ "$LOCAL_RANK" = 1 ] && exit 3; sleep 60')" "3:<N/A>"
printf '#include <stdlib.h>\nint main(void) { const char *r = getenv("LOCAL_RANK"); return r && *r == 0x31 ? 3 : 0; }\n' >"$d/fail.c"
if cc -o "$d/fail" "$d/fail.c" 2>/dev/null; then
    expect_eq "a C program failing (no --no-python): message <N/A>, no @record hint" \
        "$(message_of "$d/fail")" "3:<N/A>"
else
    skip "a C program failing: no @record hint" "no C compiler"
fi
# amldist-nccl-check fails at once where there is no GPU (its exit 3):
# a native program too.  Where it passes there is no failure to see.
NC=$BUILD/bin/amldist-nccl-check
rc=0
[ -x "$NC" ] && { timeout 120 "${A[@]}" "$NC" >"$d/o" 2>"$d/e" || rc=$?; }
if [ -x "$NC" ] && [ "$rc" != 0 ] && grep -q '^amlrun: root cause' "$d/e"; then
    expect_eq "amldist-nccl-check failing (exit $rc): message <N/A>, no @record hint" \
        "$(sed -n 's/^amlrun:   message   : //p' "$d/e")" "<N/A>"
else
    skip "amldist-nccl-check failing: no @record hint" "it is not built, or it passed (status $rc)"
fi
py=$(command -v python3 || true)
if [ -n "$py" ]; then
    expect_eq "python3 -c as the command (--no-python): the @record hint" \
        "$(message_of --no-python "$py" -c 'import os, sys, time; sys.exit(3) if os.environ["LOCAL_RANK"] == "1" else time.sleep(60)')" \
        "3:$hint"
else
    skip "python3 -c as the command: the @record hint" "no python3"
fi

# --- hostile error files: the summary says so, amlrun neither crashes nor hangs
bad() { # NAME SHELL-CODE-WRITING-$F PATTERN
    timeout 20 "${A[@]}" --no-python sh -c "F=\$TORCHELASTIC_ERROR_FILE; [ \"\$LOCAL_RANK\" = 1 ] && { $2; exit 3; }; sleep 60" \
        >"$d/o" 2>"$d/e"
    local rc=$?
    if [ $rc = 3 ] && grep -q "$3" "$d/e"; then ok "$1"; else fail "$1"; diag "rc $rc"; sed 's/^/#   /' "$d/e"; fi
}
bad "malformed JSON: said, with the byte" 'printf "{\"message\": {\"message\": \"x\"" >$F' \
    'error.json (malformed JSON at byte 27: want .,. or .}.)$'
bad "a file over 1 MiB: refused" 'head -c 2000000 /dev/zero | tr "\0" " " >$F' '(larger than 1048576 bytes)$'
bad "a FIFO: not read (no hang)" 'mkfifo $F' '(not a regular file)$'
bad "old format (string message)" 'printf "{\"message\": \"old style\", \"timestamp\": 5}" >$F' \
    '^amlrun:   message   : old style$'
bad "escapes decoded, control characters shown as ?" \
    'printf "{\"message\": {\"message\": \"E: \\\\u00e9\\\\u001b[31m \\\\ud83d\\\\ude00\"}}" >$F' \
    "^amlrun:   message   : E: é?\[31m 😀\$"
# A private directory is kept only when the summary named an error file in
# it (the ValueError run and the bad error files above); the rest are gone.
left=0
for k in "$TMPDIR"/amlrun_*; do
    [ -d "$k" ] || continue
    [ -n "$(find "$k" -name error.json)" ] || left=$((left + 1))
done
expect_eq "no private directory of amlrun's left without a root cause's error file in it" "$left" 0
