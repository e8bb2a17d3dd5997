#!/usr/bin/env bash
# amlrun in a terminal, driven as a person types (tests/amlrun/ptyrun.py: a
# pseudo-terminal, amlrun or an interactive bash in its foreground group):
# the workers' stdout and stderr are terminals of the terminal's size; a
# "\r" progress bar's update reaches the terminal before its newline, and
# before the worker is told to go on (files say when, nothing is timed);
# one prefix per line however it grows; a C program's printf without
# fflush is line-buffered; breakpoint() on rank 0 of two answers typed
# commands and continues to exit 0; two ranks' lines, written in pieces,
# never share a line on the terminal and lose nothing; Ctrl-C ends the job
# with 130 and nothing left; Ctrl-Z and fg from bash -i stop and continue
# it, typed lines reach rank 0 after fg; --stdin all|RANK|none.  Output
# that is not a terminal goes through pipes as before (the workers see no
# terminal).
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
PTY=("$TORCH_PY" "$HELPERS/ptyrun.py")
fresh() { rm -rf "$TEST_TMP/$1"; mkdir -p "$TEST_TMP/$1"; echo "$TEST_TMP/$1"; }
A=("$AMLRUN" --cpu-bind none)
# status_of OUT: the status ptyrun.py printed for its command ("status N").
status_of() { sed -n 's/^status //p' <<<"$1"; }

# --- the workers see a terminal: stdout, stderr, its size; stdin a pipe
d=$(fresh isatty)
cat >"$d/w.py" <<'PY'
import os, sys
sz = os.get_terminal_size(1)
print("rank %s out=%s err=%s in=%s size=%dx%d" % (os.environ["RANK"],
      os.isatty(1), os.isatty(2), os.isatty(0), sz.columns, sz.lines))
PY
out=$("${PTY[@]}" "$d/log" -- "${A[@]}" --nproc-per-node 2 "$d/w.py")
expect_eq "isatty: exits 0" "$(status_of "$out")" 0
check "isatty: rank 0's stdout and stderr are terminals of the terminal's size" \
    grep -q "^rank 0 out=True err=True in=False size=100x40" "$d/log"
check "isatty: rank 1's too" grep -q "^rank 1 out=True err=True in=False size=100x40" "$d/log"

# the window resized: the workers' terminals follow, and they are told
cat >"$d/winch.py" <<'PY'
import os, signal, sys
signal.signal(signal.SIGWINCH, lambda *a: (print("resized to %dx%d" % tuple(os.get_terminal_size(1)), flush=True), sys.exit(0)))
open(os.path.join(sys.argv[1], "ready." + os.environ["RANK"]), "w").close()
signal.pause()
PY
out=$("${PTY[@]}" "$d/log2" "until:[ -e $d/ready.0 ] && [ -e $d/ready.1 ]" 'winsize:30x90' \
      -- "${A[@]}" --nproc-per-node 2 "$d/winch.py" "$d")
expect_eq "SIGWINCH: the job exits 0" "$(status_of "$out")" 0
expect_eq "SIGWINCH: each rank's terminal has the new size when it is told" \
    "$(grep -c '^resized to 90x30' "$d/log2")" 2

# --- a progress bar: each "\r" update on the terminal before its newline
d=$(fresh bar)
cat >"$d/w.py" <<'PY'
import os, sys, time
d = sys.argv[1]
def wait(name):
    while not os.path.exists(os.path.join(d, name)):
        time.sleep(0.01)
sys.stderr.write("\r 10%|#"); sys.stderr.flush()
wait("go1")
sys.stderr.write("\r 20%|##"); sys.stderr.flush()
wait("go2")
sys.stderr.write("\r100%|###\n"); sys.stderr.flush()
PY
out=$("${PTY[@]}" "$d/log" 'expect:\r 10%\|#' "touch:$d/go1" 'expect:\r 20%\|##' \
      "touch:$d/go2" 'expect:\r100%\|###\n' -- "${A[@]}" --log-dir "$d/logs" "$d/w.py" "$d")
expect_eq "bar: each update reached the terminal before the worker went on; exits 0" \
    "$(status_of "$out")" 0
[ "$(status_of "$out")" = 0 ] || diag "$out"
check "bar: the log file has the worker's bytes (no \\r\\n from the pty)" \
    cmp -s "$d/logs/rank0.stderr" <(printf '\r 10%%|#\r 20%%|##\r100%%|###\n')
rm -f "$d/go1" "$d/go2"
out=$("${PTY[@]}" "$d/log2" 'expect:\r\[default0\]: 10%\|#' "touch:$d/go1" \
      'expect:\r\[default0\]: 20%\|##' "touch:$d/go2" 'expect:\r\[default0\]:100%\|###\n' \
      -- "${A[@]}" --tee 2 --log-dir "$d/logs2" "$d/w.py" "$d")
expect_eq "bar with --tee 2: live, exits 0" "$(status_of "$out")" 0
[ "$(status_of "$out")" = 0 ] || diag "$out"
# On the terminal each redraw keeps its one prefix (after the "\r"), the
# line never gets it twice; the log file has the worker's bytes.
check "bar with --tee 2: the terminal got one prefix a redraw, none twice" \
    grep -qa "^"$'\r'"\[default0\]: 10%|#"$'\r'"\[default0\]: 20%|##"$'\r'"\[default0\]:100%|###"$'\r'"\$" "$d/log2"
check "bar with --tee 2: the log file unprefixed, as the worker wrote it" \
    cmp -s "$d/logs2/rank0.stderr" <(printf '\r 10%%|#\r 20%%|##\r100%%|###\n')

# amlrun's own message while a bar's line is open: the bar's line erased
# first (never a line shared or split), the message on a line of its own,
# the bar shown again whole after it
d=$(fresh barmsg)
out=$("${PTY[@]}" "$d/log" 'expect:\r 50%' "touch:$d/shown" 'expect:\A\r\x1b\[Kamlrun: rank 1 ' \
      'expect:\n\r 50%' \
      -- "${A[@]}" --nproc-per-node 2 --no-python sh -c \
      'if [ $RANK = 0 ]; then printf "\r 50%%"; exec sleep 300; fi; while [ ! -e "$0/shown" ]; do sleep 0.01; done; exit 3' "$d")
expect_eq "a message while a bar's line is open: on a line of its own; exits 3" \
    "$(status_of "$out")" 3
[ "$(status_of "$out")" = 3 ] || diag "$out"

# --- C stdio on a terminal is line-buffered: printf, no fflush
d=$(fresh stdio)
printf '%s\n' '#include <stdio.h>' '#include <unistd.h>' \
    'int main(int c, char **v) { (void)c; printf("hello from C\n");' \
    '  while (access(v[1], F_OK) != 0) usleep(10000); printf("bye\n"); return 0; }' >"$d/w.c"
if cc -o "$d/w" "$d/w.c"; then
    out=$("${PTY[@]}" "$d/log" 'expect:hello from C\n' "touch:$d/go" 'expect:bye\n' \
          -- "${A[@]}" --no-python "$d/w" "$d/go")
    expect_eq "C printf without fflush: its line on the terminal before it goes on" \
        "$(status_of "$out")" 0
else
    fail "C printf without fflush: cc"
fi

# --- breakpoint() on rank 0 of two: a (Pdb) prompt answering typed commands
d=$(fresh pdb)
cat >"$d/w.py" <<'PY'
import os
if os.environ["RANK"] == "0":
    x = 41
    breakpoint()
    print("after", x)
else:
    print("rank 1 is done", flush=True)
PY
out=$("${PTY[@]}" "$d/log" 'expect:\(Pdb\) ' 'send:p x+1\n' 'expect:\n42\n\(Pdb\) ' \
      'send:c\n' 'expect:after 41\n' -- "${A[@]}" --nproc-per-node 2 "$d/w.py")
expect_eq "pdb on rank 0: answered p x+1, continued, exits 0" "$(status_of "$out")" 0
[ "$(status_of "$out")" = 0 ] || diag "$out"

# --- two ranks' lines in pieces, partial lines shown: never two ranks on
# one terminal line, every character once and in order
d=$(fresh mix)
cat >"$d/w.py" <<'PY'
import os, sys, time
r, n = int(os.environ["RANK"]), int(sys.argv[1])
digits, fill = ("abcdefghij", "q") if r == 0 else ("ABCDEFGHIJ", "Q")
for i in range(n):
    os.write(1, "".join(digits[int(c)] for c in str(i)).encode())
    time.sleep(0.002 * (i % 3))
    os.write(1, (fill * 5).encode())
    if i % 7 == 0:
        time.sleep(0.06)
    os.write(1, (fill * 3 + "\n").encode())
PY
out=$("${PTY[@]}" "$d/log" -- "${A[@]}" --nproc-per-node 2 "$d/w.py" 200)
expect_eq "two ranks in pieces: exits 0" "$(status_of "$out")" 0
check "two ranks in pieces: no line mixes ranks, nothing lost or doubled" \
    "$TORCH_PY" "$HELPERS/ttycheck.py" "$d/log" 200
out=$("${PTY[@]}" "$d/log2" -- "${A[@]}" --nproc-per-node 2 --prefix "$d/w.py" 200)
check "two ranks in pieces, --prefix: each line its own rank's one prefix" \
    "$TORCH_PY" "$HELPERS/ttycheck.py" "$d/log2" 200 prefix

# --- Ctrl-C typed: 130, no process left
d=$(fresh intr)
out=$("${PTY[@]}" "$d/log" "until:[ -s $d/pid.0 ] && [ -s $d/pid.1 ]" 'send:\x03' \
      -- "${A[@]}" --nproc-per-node 2 --no-python sh -c 'echo $$ >"$0/pid.$RANK"; exec sleep 300' "$d")
expect_eq "Ctrl-C: the job ends with 130" "$(status_of "$out")" 130
left=$(for f in "$d"/pid.*; do p=$(cat "$f"); [ -e "/proc/$p" ] && echo "$p"; done)
expect_eq "Ctrl-C: no worker left" "$left" ""

# --- Ctrl-Z and fg from an interactive bash; a typed line then reaches rank 0
d=$(fresh tstp)
st() { echo "awk '{print \$3}' /proc/\$(cat $d/pid.$1)/stat | grep -qx $2"; }
out=$(PS1='$ ' "${PTY[@]}" "$d/log" 'expect:\$ ' \
      "send:${A[*]} --nproc-per-node 2 --no-python sh -c 'echo \$\$ >$d/pid.\$RANK; [ \$RANK = 0 ] && read x && echo got \$x; exec sleep 300'\\n" \
      "until:[ -s $d/pid.0 ] && [ -s $d/pid.1 ]" 'send:\x1a' 'expect:Stopped' \
      "until:$(st 0 T) && $(st 1 T)" 'send:fg\n' "until:$(st 0 S) && $(st 1 S)" \
      'send:hello\n' 'expect:got hello\n' 'send:\x03' 'expect:\$ ' 'send:echo rc=$?\n' \
      'expect:rc=130\n' 'send:exit\n' -- bash --norc --noprofile -i)
expect_eq "Ctrl-Z, fg, a typed line, Ctrl-C in bash -i: each as at a terminal" \
    "$(status_of "$out")" 0
[ "$(status_of "$out")" = 0 ] || diag "$out"

# --- --stdin all in a terminal: every rank reads the typed lines, Ctrl-D ends them
d=$(fresh all)
out=$("${PTY[@]}" "$d/log" "until:[ -e $d/r.0 ] && [ -e $d/r.1 ]" 'send:one line\n' 'send:\x04' \
      -- "${A[@]}" --nproc-per-node 2 --stdin all --no-python sh -c ': >"$0/r.$RANK"; cat >"$0/in.$RANK"' "$d")
expect_eq "--stdin all in a terminal: exits 0 at Ctrl-D" "$(status_of "$out")" 0
expect_eq "--stdin all in a terminal: both ranks read the line" \
    "$(cat "$d/in.0" "$d/in.1" 2>&1)" "$(printf 'one line\none line')"

# --- no pty to be had (no devpts in this mount namespace): pipes, said once
if unshare -m true 2>/dev/null; then
    d=$(fresh nopty)
    out=$("${PTY[@]}" "$d/log" -- unshare -m sh -c 'mount -t tmpfs none /dev/pts && exec "$0" --cpu-bind none --nproc-per-node 2 --no-python sh -c "[ -t 1 ] && echo tty; echo rank \$RANK"' "$AMLRUN")
    expect_eq "no pty: the job runs, exits 0" "$(status_of "$out")" 0
    expect_eq "no pty: said once, the workers on pipes" \
        "$(grep -c '^amlrun: no pseudo-terminal for the workers' "$d/log") $(grep -c '^tty' "$d/log") $(grep -c '^rank [01]' "$d/log")" "1 0 2"
else
    skip "no pty: pipes, said once" "no mount namespace here"
fi

# --- not a terminal: pipes as before
d=$(fresh notty)
out=$("${PTY[@]}" "$d/log" -- sh -c '"$0" --cpu-bind none --nproc-per-node 2 --no-python sh -c "[ -t 1 ] && echo tty1; [ -t 2 ] && echo tty2 >&2; cat; echo rank \$RANK" >"$1/out" 2>"$1/err"' "$AMLRUN" "$d")
expect_eq "stdout and stderr to files from a terminal: exits 0" "$(status_of "$out")" 0
expect_eq "stdout and stderr to files: the workers see no terminal, no stdin" \
    "$(sort "$d/out"; grep -v '^amlrun:' "$d/err")" "$(printf 'rank 0\nrank 1')"
for mode in all 1 none default; do
    d=$(fresh "stdin-$mode")
    opt=(--stdin "$mode"); [ "$mode" = default ] && opt=()
    printf 'a\nb\n' | "${A[@]}" --nproc-per-node 2 "${opt[@]}" --no-python \
        sh -c 'cat >"$0/in.$RANK"' "$d" 2>/dev/null
    got=$(for r in 0 1; do printf '%s:' "$r"; tr '\n' ' ' <"$d/in.$r"; done)
    case $mode in
    all) want='0:a b 1:a b ' ;; 1) want='0:1:a b ' ;; none) want='0:1:' ;; default) want='0:a b 1:' ;;
    esac
    expect_eq "--stdin $mode from a pipe" "$got" "$want"
done
d=$(fresh stdin-beyond)
printf 'a\n' | "${A[@]}" --nproc-per-node 2 --stdin 2 --no-python sh -c 'cat >"$0/in.$RANK"' "$d" 2>"$TEST_TMP/beyond"
expect_eq "--stdin 2 of 2 ranks: a usage error" "$?" 2
check "--stdin 2 of 2 ranks: says why, no worker started" \
    sh -c 'grep -q "^amlrun: --stdin 2: no such rank: this job has 2 ranks (0 to 1); no worker started" "$0" && ! ls "$1"/in.* 2>/dev/null' "$TEST_TMP/beyond" "$d"
"${A[@]}" --stdin 2x true 2>"$TEST_TMP/bad"
expect_eq "--stdin 2x: a usage error" "$?" 2
check "--stdin 2x: says what it wants" grep -q "^amlrun: --stdin 2x: want a rank, all or none" "$TEST_TMP/bad"
