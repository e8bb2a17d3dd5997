#!/usr/bin/env bash
# amlrun --hostfile with files that are not hostfiles, or huge ones: a usage
# error (2) naming file, line and what is wrong, at once and in bounded
# memory; a large cluster's file read in linear time.  (The parser's cases
# are in tests/unit/test_hostfile.c.)
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
d=$TEST_TMP/hostfile
mkdir -p "$d"

# --- /dev/zero: no line ever ends; it used to grow memory until killed
# (at once: a read to the end would meet the 60 s timeout, 124)
(ulimit -v 1000000; timeout 60 "$AMLRUN" --hostfile /dev/zero true) >/dev/null 2>"$d/err"
expect_eq "--hostfile /dev/zero: usage error" "$?" 2
expect_eq "--hostfile /dev/zero: says why" "$(cat "$d/err")" \
    "amlrun: /dev/zero:1: NUL byte: not a text file"

# --- an endless stream of blank lines stops at the size bound
(ulimit -v 1000000; timeout 60 "$AMLRUN" --hostfile <(yes '') true) >/dev/null 2>"$d/err"
expect_eq "--hostfile of endless blank lines: usage error" "$?" 2
check "--hostfile of endless blank lines: says the file is too large" \
    grep -q "^amlrun: /dev/fd/[0-9]*: larger than 64 MiB: not a hostfile$" "$d/err"

# --- a key given twice: neither value is taken
printf 'a slots=2\nb slots=2 slots=3\n' >"$d/dup"
"$AMLRUN" --hostfile "$d/dup" true >/dev/null 2>"$d/err"
expect_eq "slots= twice on a line: usage error" "$?" 2
expect_eq "slots= twice on a line: names line and key" "$(cat "$d/err")" \
    "amlrun: $d/dup:2: key 'slots' is given twice (slots=2 before)"

# --- 400k hosts: 100k took 17 s when every host was compared with every
#     other (400k would take about 16 times that, 270 s); linear, it is a
#     fraction of a second.  The command's timeout, 120 s, is a hang guard
#     hundreds of times what it needs: quadratic, it ends by it (124).
seq -f 'node%g slots=8' 1 400000 >"$d/big"
timeout 120 "$AMLRUN" --hostfile "$d/big" --dry-run --no-python true >"$d/out" 2>"$d/err"
expect_eq "400000 hosts: the command is built (0), in linear time (quadratic: 124)" "$?" 0
check "400000 hosts: every host in --host" \
    grep -q -- "--host node1:1,node2:1,.*,node399999:1,node400000:1 " "$d/out"
