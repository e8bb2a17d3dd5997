#!/usr/bin/env bash
# Output integrity: 4 ranks write 50000 lines each on stdout and on stderr
# (400000 lines, random lengths, some longer than a pipe buffer, written in
# pieces cut anywhere); every line reaches amlrun's stdout/stderr whole,
# exactly once, in order per rank, with and without prefixes; log files get
# every byte; the console filter hides ranks but logs keep them; a line cut
# by SIGKILL and a last line without newline still arrive; --log-dir never
# follows a planted symbolic link.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
N=50000
d=$TEST_TMP/out
mkdir -p "$d"
W="$HELPERS/outwriter.py"
C="$HELPERS/outcheck.py"
py=$TORCH_PY

# --- with prefixes and logs
"$AMLRUN" --nproc-per-node 4 --prefix --log-dir "$d/logs" "$W" "$N" >"$d/o" 2>"$d/e"
expect_eq "writers exit 0" "$?" 0
check "stdout: 200000 whole prefixed lines, each once, in order" "$py" "$C" "$d/o" 1 0,1,2,3 "$N" prefix
check "stderr: 200000 whole prefixed lines, each once, in order" "$py" "$C" "$d/e" 2 0,1,2,3 "$N" prefix
for r in 0 3; do
    check "log rank$r.stdout: every line, no prefix" "$py" "$C" "$d/logs/rank$r.stdout" 1 "$r" "$N" plain
    check "log rank$r.stderr: every line, no prefix" "$py" "$C" "$d/logs/rank$r.stderr" 2 "$r" "$N" plain
done
check "log keeps the last line without its newline (raw bytes)" \
    test "$(tail -c 1 "$d/logs/rank2.stdout" | od -An -c | tr -d ' ')" != '\n'
check "console ends the last line with a newline" \
    test "$(tail -c 1 "$d/o" | od -An -c | tr -d ' ')" = '\n'

# --- without prefixes (the default), and a worker SIGKILLed mid-line
"$AMLRUN" --nproc-per-node 4 "$W" 20000 killmid >"$d/o2" 2>"$d/e2"
expect_eq "SIGKILL mid-line: job exits 137" "$?" 137
# the others were stopped early: check what they wrote is whole and ordered
# (the others were stopped by SIGTERM, perhaps in the middle of a line too:
# only a rank's last line may be incomplete, and it must still be its own)
"$py" - "$d/o2" "$d/e2" <<'PY'
import re, sys, zlib
bad = 0
for path in sys.argv[1:]:
    last = {}
    lines = [ln for ln in open(path, "rb").read().split(b"\n")
             if ln and not ln.startswith(b"amlrun: ")]
    short = 0
    for ln in lines:
        m = re.match(rb"R(\d+) (?:S\d+ (?:N(\d+) )?)?", ln)
        # The job's stop may cut another rank's last line after a byte or
        # two ("R", "R2"), too short to name its rank: at most one per rank.
        if not m and re.fullmatch(rb"R\d*", ln) and short < 3:
            short += 1
            continue
        if not m:
            print("# not a line of any rank:", ln[:60]); bad += 1; continue
        r = int(m.group(1))
        n = int(m.group(2)) if m.group(2) else last.get(r, (-1,))[0] + 1
        if r in last and last[r][1] is not None:
            print("# a line after an incomplete one:", ln[:60]); bad += 1
        whole = re.match(rb".* C([0-9a-f]{8})$", ln, re.S)
        whole = whole and zlib.crc32(ln[:ln.rindex(b" C")]) == int(whole.group(1), 16)
        if last.get(r, (-1,))[0] + 1 != n:
            print("# out of order", r, n); bad += 1
        last[r] = (n, None if whole else ln)
    if path.endswith("e2") and not (last.get(1, (0, b""))[1] or b"").endswith(b"CUT"):
        print("# the line cut by SIGKILL is missing"); bad += 1
sys.exit(1 if bad else 0)
PY
expect_eq "SIGKILL mid-line: all lines whole and ordered, the cut one kept" "$?" 0
check "SIGKILL mid-line: summary names rank 1" grep -q "^amlrun: rank 1 .*killed by signal 9 (SIGKILL)" "$d/e2"

# --- console filter: only ranks 0 and 2 shown, all four logged
"$AMLRUN" --nproc-per-node 4 --ranks 0,2 --log-dir "$d/logs3" "$W" 2000 >"$d/o3" 2>"$d/e3"
check "--ranks 0,2: console has exactly ranks 0 and 2" "$py" "$C" "$d/o3" 1 0,2 2000 plain
check "--ranks 0,2: rank 1 still logged" "$py" "$C" "$d/logs3/rank1.stdout" 1 1 2000 plain
"$AMLRUN" --nproc-per-node 4 --local-ranks-filter 3 --tee 2 "$W" 500 >"$d/o4" 2>"$d/e4"
check "--local-ranks-filter 3: stdout only rank 3, unprefixed" "$py" "$C" "$d/o4" 1 3 500 plain
check "--tee 2: stderr only rank 3, prefixed" "$py" "$C" "$d/e4" 2 3 500 prefix

# --- prefix format
out=$("$AMLRUN" --nproc-per-node 2 --ranks 1 --prefix='%h/%n/%l/%r/%s/%%> ' sh -c 'echo hi; echo ho >&2' 2>&1 | no_success_line)
expect_eq "--prefix=FMT expands %h %n %l %r %s %%" "$(echo "$out" | sort)" \
    "$(printf '%s/0/1/1/stderr/%%> ho\n%s/0/1/1/stdout/%%> hi' "$(hostname)" "$(hostname)")"

# --- a slow console slows writers but loses nothing
"$AMLRUN" --nproc-per-node 2 "$W" 3000 2>/dev/null | "$py" -c '
import sys, time
n = 0
for ln in sys.stdin.buffer:
    n += 1
    if n % 500 == 0: time.sleep(0.05)
print(n)' >"$d/slow"
expect_eq "slow reader: every line arrives" "$(cat "$d/slow")" 6000

# --- --log-dir never follows a planted symlink, nor writes through a hard link
mkdir -p "$d/trap"
echo precious >"$d/target"
ln -s "$d/target" "$d/trap/rank0.stdout"
"$AMLRUN" --log-dir "$d/trap" echo overwritten >/dev/null 2>"$d/e5"
rc=$?
check "planted symlink: amlrun refuses (status $rc)" test "$rc" -ne 0
expect_eq "planted symlink: the target is untouched" "$(cat "$d/target")" precious
check "planted symlink: the message says why" grep -q "symbolic link" "$d/e5"
rm "$d/trap/rank0.stdout"
ln "$d/target" "$d/trap/rank0.stdout"
"$AMLRUN" --log-dir "$d/trap" echo overwritten >/dev/null 2>"$d/e6"
expect_eq "planted hard link: the target is untouched" "$(cat "$d/target")" precious
rm "$d/trap/rank0.stdout"
"$AMLRUN" --log-dir "$d/trap" echo first >/dev/null
"$AMLRUN" --log-dir "$d/trap" echo second >/dev/null
expect_eq "an old log of ours is replaced" "$(cat "$d/trap/rank0.stdout")" second
