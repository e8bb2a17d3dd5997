#!/usr/bin/env bash
# Output under hostile conditions: a file size limit (ulimit -f) with
# --log-dir, a non-blocking stdout/stderr (O_NONBLOCK set by a parent on a
# shared file description) with a slow reader, a console that goes away
# (`amlrun ... yes | head -1`), and a --log-dir that is a symbolic link.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
d=$TEST_TMP/faults
mkdir -p "$d"
W="$HELPERS/outwriter.py"
C="$HELPERS/outcheck.py"
py=$TORCH_PY
# Workers get the SIGPIPE disposition amlrun was started with: start it
# with the default one, as an interactive shell does (a CI runner may
# ignore it).
DFL=(perl -e '$SIG{$_} = "DEFAULT" for qw(PIPE XFSZ); exec @ARGV or die')

# --- ulimit -f with --log-dir: amlrun survives SIGXFSZ, says EFBIG once per
# file (naming rank and file), and the console stays whole.  The console is
# a pipe to a process outside the limit (stdout and stderr both).
N=3000
rm -rf "$d/logs"
mkfifo "$d/efifo"
cat "$d/efifo" >"$d/e1" &
cat_pid=$!
( ulimit -f 64; "${DFL[@]}" "$AMLRUN" --nproc-per-node 2 --log-dir "$d/logs" "$W" "$N" \
    2>"$d/efifo"; echo $? >"$d/rc1" ) | cat >"$d/o1"
wait "$cat_pid"
expect_eq "ulimit -f: amlrun is not killed by SIGXFSZ, the job exits 0" "$(cat "$d/rc1")" 0
check "ulimit -f: stdout whole, every line of both ranks" "$py" "$C" "$d/o1" 1 0,1 "$N" plain
check "ulimit -f: stderr whole, every line of both ranks" "$py" "$C" "$d/e1" 2 0,1 "$N" plain
for f in rank0.stdout rank1.stderr; do
    expect_eq "ulimit -f: $f: reported once, naming rank and file" \
        "$(grep -c "^amlrun: rank ${f:4:1}: log file $d/logs/$f: File too large" "$d/e1")" 1
done
check "ulimit -f: the log kept what fit (64 KiB)" \
    test "$(stat -c %s "$d/logs/rank0.stdout")" -eq 65536
# the worker itself still dies of SIGXFSZ, as it would without amlrun
( ulimit -f 1; "${DFL[@]}" "$AMLRUN" sh -c 'exec head -c 10000 /dev/zero >"$0/big"' "$d" 2>"$d/e2"
  echo $? >"$d/rc2" )
expect_eq "ulimit -f: a worker over the limit dies of SIGXFSZ (153)" "$(cat "$d/rc2")" 153
check "ulimit -f: amlrun survives to report it" \
    grep -q "^amlrun: rank 0 .*killed by signal 25 (SIGXFSZ)" "$d/e2"

# stdout itself a file over the limit: said once, the job goes on
( ulimit -f 4; "${DFL[@]}" "$AMLRUN" --nproc-per-node 2 sh -c \
    'i=0; while [ $i -lt 2000 ]; do echo "line $i of rank $RANK"; i=$((i+1)); done' \
    >"$d/o2" 2>"$d/e2b"; echo $? >"$d/rc2b" )
expect_eq "ulimit -f on stdout: the job exits 0" "$(cat "$d/rc2b")" 0
expect_eq "ulimit -f on stdout: said once" \
    "$(grep -c "^amlrun: stdout: File too large: the rest of the workers' output to it is dropped" "$d/e2b")" 1

# --- O_NONBLOCK inherited on stdout and stderr (one pipe, a slow reader):
# amlrun waits for room, loses no line
N=3000
nonblock() {
    "$py" -c 'import fcntl, os, sys
for fd in (1, 2):
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
os.execv(sys.argv[1], sys.argv[1:])' "$@"
}
slow_reader() {
    "$py" -c 'import sys, time
time.sleep(0.5)
n = 0
for ln in sys.stdin.buffer:
    sys.stdout.buffer.write(ln)
    n += 1
    if n % 500 == 0: time.sleep(0.05)'
}
for pfx in "" --prefix; do
    { nonblock "$AMLRUN" --nproc-per-node 2 $pfx "$W" "$N" 2>&1; echo $? >"$d/rc3"; } |
        slow_reader >"$d/o3"
    what="O_NONBLOCK console${pfx:+ $pfx}"
    expect_eq "$what: exit 0" "$(cat "$d/rc3")" 0
    grep -a '^\(\[rank[0-9]\]:\)\?R[0-9]* S1 ' "$d/o3" >"$d/o3.1"
    grep -a '^\(\[rank[0-9]\]:\)\?R[0-9]* S2 ' "$d/o3" >"$d/o3.2"
    check "$what: every stdout line arrives whole" "$py" "$C" "$d/o3.1" 1 0,1 "$N" "${pfx:+prefix}"
    check "$what: every stderr line arrives whole" "$py" "$C" "$d/o3.2" 2 0,1 "$N" "${pfx:+prefix}"
    check "$what: nothing dropped, nothing reported" \
        test "$(no_success_line <"$d/o3" | grep -ac '^amlrun: ')" -eq 0
done

# --- the console goes away: the workers see EPIPE/SIGPIPE as they would
# without amlrun, and the job ends (exit 128+SIGPIPE, as `yes` would give)
for args in "" "--prefix" "--log-dir $d/logs4" "--ranks 1"; do
    out=$(timeout 30 "${DFL[@]}" "$AMLRUN" --nproc-per-node 2 $args yes 2>"$d/e4" | head -n 1
          echo "${PIPESTATUS[0]}")
    what="yes | head -1${args:+ ($args)}"
    expect_eq "$what: ends, with the status of a SIGPIPE death" "$(echo "$out" | tail -n 1)" 141
    check "$what: says which rank died of SIGPIPE" \
        grep -q "^amlrun: rank [01] .*killed by signal 13 (SIGPIPE)" "$d/e4"
done
# no restart: the next attempt would meet the same closed pipe
out=$(timeout 30 "${DFL[@]}" "$AMLRUN" --nproc-per-node 2 --max-restarts 3 yes 2>"$d/e4" |
      head -n 1; echo "${PIPESTATUS[0]}")
expect_eq "yes | head -1 (--max-restarts 3): ends at once, 141" "$(echo "$out" | tail -n 1)" 141
expect_eq "yes | head -1 (--max-restarts 3): no restart" "$(grep -c restarting "$d/e4")" 0
# a worker that ignores SIGPIPE gets EPIPE from its next write, and can go on
out=$(timeout 30 "${DFL[@]}" "$AMLRUN" --nproc-per-node 2 --prefix sh -c \
      'trap "" PIPE; while echo y; do :; done 2>/dev/null; echo "rank $RANK: write failed" >&2' \
      2>"$d/e5" | head -n 1; echo "${PIPESTATUS[0]}")
expect_eq "SIGPIPE ignored: the workers end normally" "$(echo "$out" | tail -n 1)" 0
expect_eq "SIGPIPE ignored: every worker's write failed" \
    "$(grep -c '^\[rank[01]\]:rank [01]: write failed$' "$d/e5")" 2

# --- a --log-dir that is a symbolic link is refused, the target untouched
mkdir -p "$d/real"
echo precious >"$d/real/rank0.stdout"
ln -s "$d/real" "$d/link"
for dir in "$d/link" "$d/link/" "$d/link//"; do
    "$AMLRUN" --log-dir "$dir" echo overwritten >/dev/null 2>"$d/e6"
    rc=$?
    expect_eq "--log-dir $dir (a symlink): usage error" "$rc" 2
    expect_eq "--log-dir $dir: the file in the target is untouched" \
        "$(cat "$d/real/rank0.stdout")" precious
    check "--log-dir $dir: the message names it a symbolic link" \
        grep -q "^amlrun: --log-dir $dir: .*symbolic link" "$d/e6"
done
ln -s "$d/nowhere" "$d/dangling"
"$AMLRUN" --log-dir "$d/dangling" echo x >/dev/null 2>"$d/e7"
expect_eq "--log-dir a dangling symlink: usage error" "$?" 2
check "--log-dir a dangling symlink: nothing created at its target" test ! -e "$d/nowhere"
# a symlink higher up the path is the user's business
"$AMLRUN" --log-dir "$d/link/sub" echo fine >/dev/null 2>"$d/e8"
expect_eq "--log-dir under a symlinked parent: works" "$(cat "$d/real/sub/rank0.stdout")" fine
