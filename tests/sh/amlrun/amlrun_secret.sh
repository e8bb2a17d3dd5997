#!/usr/bin/env bash
# The job's secret in amlrun (issue 21):
#  - amlrun --make-secret: the XDG file, 64 hex digits, directories 0700,
#    file 0600, the path on stdout and nothing of the secret; never over an
#    existing one;
#  - a secret file that breaks the rules (mode 0644 or 0640, another
#    user's, a symbolic link to a good file, a directory, missing, empty;
#    AMLDIST_JOB_TOKEN_FILE or the XDG file) stops the job before any
#    worker starts: exit status 2 and one line naming the file and what is
#    wrong; so does a secret under 32 bytes (issue 38), from the variable
#    or a file, while 32 bytes (and a file's newline beside them) run;
#  - another local user (useradd, runuser) can read neither the file nor a
#    running job's secret in /proc (environ, cmdline);
#  - a job of several nodes without a secret: one note per node that the
#    plane is open (none under -q, none for one node); with
#    AMLDIST_REQUIRE_SECRET=1 it is refused (exit 2, a line saying how to
#    make one), and runs with a secret.
# The multi-node cases meet on loopback in a network namespace of their own.
if [ -z "${AMLRUN_SECRET_NETNS:-}" ] && unshare -n true 2>/dev/null; then
    exec env AMLRUN_SECRET_NETNS=1 unshare -n bash "$0" "$@"
fi
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/amlrun/common.sh"
. "$TOP/tests/amlrun/stranger.sh"
[ -n "${AMLRUN_SECRET_NETNS:-}" ] && ip link set lo up
d=$TEST_TMP
unset AMLDIST_JOB_TOKEN AMLDIST_JOB_TOKEN_FILE AMLDIST_REQUIRE_SECRET
export XDG_CONFIG_HOME=$d/cfg
T="timeout -k 5 60"
have_stranger=0
stranger_setup && have_stranger=1
A=("$AMLRUN" --cpu-bind none)

# ---- --make-secret -------------------------------------------------------
rc=0
out=$("$AMLRUN" --make-secret 2>"$d/mk.err") || rc=$?
f=$d/cfg/amldist/secret
expect_eq "--make-secret: exit status 0" "$rc" 0
expect_eq "--make-secret: prints the path, nothing else" "$out" "$f"
expect_eq "--make-secret: says nothing else" "$(cat "$d/mk.err")" ""
expect_eq "--make-secret: directories 0700, file 0600" \
    "$(stat -c %a "$d/cfg" "$d/cfg/amldist" "$f" | tr '\n' ' ')" "700 700 600 "
check "--make-secret: 64 hex digits and a newline" \
    sh -c '[ "$(wc -c <"$0")" = 65 ] && grep -qx "[0-9a-f]\{64\}" "$0"' "$f"
cp "$f" "$d/first"
rc=0
out=$("$AMLRUN" --make-secret 2>"$d/mk2.err") || rc=$?
expect_eq "--make-secret again: exit status 1, nothing on stdout" "$rc:$out" "1:"
check "--make-secret again: says that it exists and is not overwritten" \
    grep -q "^amlrun: --make-secret: $f exists already: not overwritten" "$d/mk2.err"
check "--make-secret again: the secret is unchanged" cmp -s "$f" "$d/first"
check "--make-secret: the secret is in none of its output" \
    sh -c '! grep -qF -f "$0" "$1" "$2"' "$f" "$d/mk.err" "$d/mk2.err"
rc=0
"$AMLRUN" --make-secret true >/dev/null 2>&1 || rc=$?
expect_eq "--make-secret with a command: a usage error" "$rc" 2
rc=0
XDG_CONFIG_HOME=$d/cfg-link "$AMLRUN" --make-secret >/dev/null 2>&1 || true
mkdir -p "$d/cfg3/amldist" && ln -s "$d/elsewhere" "$d/cfg3/amldist/secret"
XDG_CONFIG_HOME=$d/cfg3 "$AMLRUN" --make-secret >/dev/null 2>&1 || rc=$?
check "--make-secret: a symbolic link where the file goes is not followed" \
    test "$rc" = 1 -a ! -e "$d/elsewhere"

# ---- the rules of a secret file ------------------------------------------------
# refused NAME WANT [VAR=VALUE...]: a one-node job with these variables is
# refused with exit status 2 and one line matching WANT; no worker ran.
refused() {
    local name=$1 want=$2 rc=0
    shift 2
    rm -f "$d/ran"
    env "$@" "${A[@]}" --nproc-per-node 1 --no-python touch "$d/ran" >"$d/r.out" 2>"$d/r.err" || rc=$?
    expect_eq "$name: exit status 2" "$rc" 2
    check "$name: no worker started" test ! -e "$d/ran"
    expect_eq "$name: one line on stderr" "$(wc -l <"$d/r.err")" 1
    check "$name: the line names the file and why" grep -q -- "$want" "$d/r.err"
    [ "$rc" = 2 ] && grep -q -- "$want" "$d/r.err" || sed 's/^/# stderr: /' "$d/r.err"
}
good=$d/good
printf '%s\n' "$(job_secret file-secret)" >"$good"
chmod 600 "$good"
install -m 644 "$good" "$d/open"
install -m 640 "$good" "$d/group"
ln -s "$good" "$d/link"
mkdir -m 700 "$d/dir"
install -m 600 /dev/null "$d/empty"
refused "AMLDIST_JOB_TOKEN_FILE mode 0644" "^amlrun: AMLDIST_JOB_TOKEN_FILE=$d/open: mode 0644 lets group or others in, refused (chmod 600 $d/open); no worker started$" \
    AMLDIST_JOB_TOKEN_FILE="$d/open"
refused "AMLDIST_JOB_TOKEN_FILE mode 0640" "$d/group: mode 0640 lets group or others in" \
    AMLDIST_JOB_TOKEN_FILE="$d/group"
refused "AMLDIST_JOB_TOKEN_FILE a symbolic link to a good file" "$d/link: a symbolic link, refused" \
    AMLDIST_JOB_TOKEN_FILE="$d/link"
refused "AMLDIST_JOB_TOKEN_FILE a directory" "$d/dir: a directory (mode 0700), not a regular file" \
    AMLDIST_JOB_TOKEN_FILE="$d/dir"
refused "AMLDIST_JOB_TOKEN_FILE missing" "$d/missing: No such file or directory" \
    AMLDIST_JOB_TOKEN_FILE="$d/missing"
refused "AMLDIST_JOB_TOKEN_FILE empty" "$d/empty: empty (make one with amlrun --make-secret)" \
    AMLDIST_JOB_TOKEN_FILE="$d/empty"
chmod 640 "$f"
refused "the XDG file with mode 0640" "^amlrun: secret file $f: mode 0640 lets group or others in"
chmod 600 "$f"
if [ "$have_stranger" = 1 ]; then
    install -m 600 -o "$STRANGER" "$good" "$d/theirs"
    refused "AMLDIST_JOB_TOKEN_FILE owned by another user" \
        "$d/theirs: owned by uid $STRANGER_UID, not by this user (uid 0), refused (mode 0600)" \
        AMLDIST_JOB_TOKEN_FILE="$d/theirs"
else
    skip "a secret file owned by another user" "not root, or no useradd/runuser"
fi
rc=0
AMLDIST_JOB_TOKEN_FILE=$good "${A[@]}" --nproc-per-node 1 --no-python true >/dev/null 2>"$d/ok.err" || rc=$?
expect_eq "a good AMLDIST_JOB_TOKEN_FILE: the job runs, nothing said" "$rc:$(no_success_line <"$d/ok.err")" "0:"

# ---- a secret under 32 bytes (issue 38): one sniffed handshake would let
#      anyone try every shorter value offline; refused before anything
#      starts, the line naming the source, its length and how to make one
how="under the 32 a secret needs (a short one can be guessed offline from one sniffed handshake), refused; make one with amlrun --make-secret, or head -c 32 /dev/urandom | base64; no worker started"
s32=0123456789abcdef0123456789abcdef
refused "AMLDIST_JOB_TOKEN of 1 byte" "^amlrun: AMLDIST_JOB_TOKEN: 1 byte, $how$" AMLDIST_JOB_TOKEN=Q
check "AMLDIST_JOB_TOKEN of 1 byte: the secret is not in the message" sh -c '! grep -q Q "$0"' "$d/r.err"
refused "AMLDIST_JOB_TOKEN of 31 bytes" "^amlrun: AMLDIST_JOB_TOKEN: 31 bytes, $how$" AMLDIST_JOB_TOKEN="${s32%?}"
printf '%s\n' "${s32%?}" >"$d/short"
chmod 600 "$d/short"
refused "AMLDIST_JOB_TOKEN_FILE of 31 bytes and a newline" "^amlrun: secret file $d/short: 31 bytes, $how$" \
    AMLDIST_JOB_TOKEN_FILE="$d/short"
# AMLDIST_REQUIRE_SECRET=0 does not let a short one through: it is a secret
# given, not one missing.
refused "AMLDIST_JOB_TOKEN of 31 bytes, AMLDIST_REQUIRE_SECRET=0" "AMLDIST_JOB_TOKEN: 31 bytes" \
    AMLDIST_JOB_TOKEN="${s32%?}" AMLDIST_REQUIRE_SECRET=0
mkdir -m 700 -p "$d/cfg-short/amldist"
install -m 600 "$d/short" "$d/cfg-short/amldist/secret"
refused "the XDG file of 31 bytes" "^amlrun: secret file $d/cfg-short/amldist/secret: 31 bytes, under the 32" \
    XDG_CONFIG_HOME="$d/cfg-short"
rc=0
AMLDIST_JOB_TOKEN=$s32 "${A[@]}" --nproc-per-node 1 --no-python true >/dev/null 2>"$d/ok.err" || rc=$?
expect_eq "AMLDIST_JOB_TOKEN of 32 bytes: the job runs, nothing said" "$rc:$(no_success_line <"$d/ok.err")" "0:"
printf '%s\n' "$s32" >"$d/s32"
chmod 600 "$d/s32"
rc=0
AMLDIST_JOB_TOKEN_FILE=$d/s32 "${A[@]}" --nproc-per-node 1 --no-python true >/dev/null 2>"$d/ok.err" || rc=$?
expect_eq "a secret file of 32 bytes and its newline: the job runs, nothing said" \
    "$rc:$(no_success_line <"$d/ok.err")" "0:"
rc=0
AMLDIST_JOB_TOKEN=$(head -c 32 /dev/urandom | base64) "${A[@]}" --nproc-per-node 1 --no-python true \
    >/dev/null 2>"$d/ok.err" || rc=$?
expect_eq "the message's head -c 32 /dev/urandom | base64: accepted" "$rc:$(no_success_line <"$d/ok.err")" "0:"
check "--make-secret's file is long enough (64 bytes and a newline)" test "$(wc -c <"$f")" = 65

# ---- another local user ------------------------------------------------------
if [ "$have_stranger" = 1 ]; then
    check "another user cannot read the XDG secret" \
        sh -c '! runuser -u "$0" -- cat "$1" >/dev/null 2>&1' "$STRANGER" "$f"
    rc=0
    as_stranger env AMLDIST_JOB_TOKEN_FILE="$f" "$AMLRUN" --cpu-bind none --nproc-per-node 1 \
        --no-python true >/dev/null 2>"$STRANGER_DIR/err" || rc=$?
    check "another user's amlrun naming root's secret file is refused (2), the file named" \
        sh -c '[ "$0" = 2 ] && grep -q "AMLDIST_JOB_TOKEN_FILE=$1: Permission denied" "$2"' "$rc" "$f" "$STRANGER_DIR/err"
    # A running job with a secret in its environment: amlrun and its
    # worker, root's processes, keep it from the other user.
    sec=$(job_secret job-secret)
    printf '%s' "$sec" >"$d/sec"
    AMLDIST_JOB_TOKEN=$sec AMLRUN_TEST_D=$d "${A[@]}" --nproc-per-node 1 --no-python \
        sh -c 'touch "$AMLRUN_TEST_D/running"; while [ ! -e "$AMLRUN_TEST_D/release" ]; do sleep 0.05; done' &
    job=$!
    end=$((SECONDS + 30))
    until [ -e "$d/running" ] || [ "$SECONDS" -ge "$end" ]; do sleep 0.05; done
    pids=$(grep -lsaF "AMLRUN_TEST_D=$d" /proc/[0-9]*/environ |
        sed -n 's|^/proc/\([0-9]*\)/environ$|\1|p' | grep -vx "$$" | tr '\n' ' ')
    check "a running job's processes are found (amlrun and its worker: $pids)" test "$(wc -w <<<"$pids")" -ge 2
    for p in $pids; do
        check "another user cannot read /proc/$p/environ" \
            sh -c '! runuser -u "$0" -- cat "/proc/$1/environ" >/dev/null 2>&1' "$STRANGER" "$p"
    done
    expect_eq "no process's command line holds a running job's secret" \
        "$(grep -lsaF -f "$d/sec" /proc/[0-9]*/cmdline)" ""
    touch "$d/release"
    wait "$job"
else
    skip "another user and the secret" "not root, or no useradd/runuser"
fi

# ---- several nodes: the note, AMLDIST_REQUIRE_SECRET -----------------------------
if [ -z "${AMLRUN_SECRET_NETNS:-}" ]; then
    skip "jobs of several nodes on loopback" "no network namespace (unshare -n)"; exit 0
fi
# two PORT [ARGS...]: a job of two amlruns on loopback; their stderr in
# $d/n0.err and $d/n1.err, their statuses in RC0 and RC1.
two() {
    local port=$1 p0
    shift
    RC0=0 RC1=0
    $T "${A[@]}" --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --master-port "$port" \
        --nproc-per-node 1 "$@" --no-python true >/dev/null 2>"$d/n0.err" &
    p0=$!
    $T "${A[@]}" --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port "$port" \
        --nproc-per-node 1 "$@" --no-python true >/dev/null 2>"$d/n1.err" || RC1=$?
    wait "$p0" || RC0=$?
}
note="amlrun: note: no secret: this job's control plane and bootstrap are open to anyone who can reach their ports; amlrun --make-secret closes them (see amldist_rdzv(3), SECURITY)"
export XDG_CONFIG_HOME=$d/none
two 29800
expect_eq "two nodes without a secret: both succeed" "$RC0 $RC1" "0 0"
expect_eq "two nodes without a secret: node 0 says once that the plane is open" "$(no_success_line <"$d/n0.err")" "$note"
expect_eq "two nodes without a secret: node 1 says it once too" "$(no_success_line <"$d/n1.err")" "$note"
two 29810 -q
expect_eq "two nodes without a secret, -q: no note" "$RC0 $RC1:$(cat "$d/n0.err" "$d/n1.err")" "0 0:"
rc=0
"${A[@]}" --nproc-per-node 1 --no-python true 2>"$d/one.err" || rc=$?
expect_eq "one node without a secret: no note" "$rc:$(no_success_line <"$d/one.err")" "0:"
rc=0
AMLDIST_REQUIRE_SECRET=1 $T "${A[@]}" --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 \
    --master-port 29820 --nproc-per-node 1 --no-python touch "$d/ran" >/dev/null 2>"$d/req.err" || rc=$?
expect_eq "AMLDIST_REQUIRE_SECRET=1, two nodes, no secret: refused (2)" "$rc" 2
check "AMLDIST_REQUIRE_SECRET=1: no worker started" test ! -e "$d/ran"
check "AMLDIST_REQUIRE_SECRET=1: one line saying how to make one" \
    sh -c '[ "$(wc -l <"$0")" = 1 ] && grep -q "^amlrun: AMLDIST_REQUIRE_SECRET=1 and this job of several nodes has no secret: refused; make one with amlrun --make-secret" "$0"' "$d/req.err"
rc=0
AMLDIST_REQUIRE_SECRET=1 "${A[@]}" --nproc-per-node 2 --no-python true 2>/dev/null || rc=$?
expect_eq "AMLDIST_REQUIRE_SECRET=1, one node: runs" "$rc" 0
rc=0
AMLDIST_REQUIRE_SECRET=yes "${A[@]}" --nproc-per-node 1 --no-python true 2>"$d/bad.err" || rc=$?
check "AMLDIST_REQUIRE_SECRET=yes: a usage error naming the value" \
    sh -c '[ "$0" = 2 ] && grep -q "AMLDIST_REQUIRE_SECRET=yes: want 1" "$1"' "$rc" "$d/bad.err"
export XDG_CONFIG_HOME=$d/cfg
AMLDIST_REQUIRE_SECRET=1 two 29830
expect_eq "AMLDIST_REQUIRE_SECRET=1 with the XDG secret: the job runs, no note" \
    "$RC0 $RC1:$(cat "$d/n0.err" "$d/n1.err" | no_success_line)" "0 0:"
AMLDIST_JOB_TOKEN_FILE=$good two 29840
expect_eq "with AMLDIST_JOB_TOKEN_FILE on both nodes: the job runs, no note" \
    "$RC0 $RC1:$(cat "$d/n0.err" "$d/n1.err" | no_success_line)" "0 0:"
