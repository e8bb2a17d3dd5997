#!/usr/bin/env bash
# amlrun with every binding off against the fork floor (issue 23): a bare
# fork and exec of 8 /bin/true and a wait for them, the least any launcher
# can take.  ROUNDS rounds, the floor and amlrun in each, in an order that
# turns round by round (bench/launch_floor.c), so that both see the same
# load; prints the median of each and the median of the per-round ratios.
# AMLRUN_B=another amlrun (a build before, from `git worktree`) joins each
# round as a third, for a change's figure against the same floor.
#     bench/launch_floor.sh [ROUNDS]      (default 30)
set -eu
cd "$(dirname "$0")/.."
ROUNDS=${1:-30}
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
AMLRUN=${AMLRUN:-$BUILD/bin/amlrun}
AMLRUN_B=${AMLRUN_B:-}
export OMP_NUM_THREADS=1 # no notice from amlrun in the timings
tmp=$(mktemp "${TMPDIR:-/tmp}/amlrun-floor.XXXXXX")
trap 'rm -f "$tmp"' EXIT
make -s BUILD="$BUILD" "$BUILD/bench/launch_floor" >/dev/null
OFF=(--nproc-per-node 8 --cpu-bind none --mem-bind none --nic-bind none --gpu-bind none /bin/true)
cmds=(-- "$AMLRUN" "${OFF[@]}")
[ -n "$AMLRUN_B" ] && cmds+=(-- "$AMLRUN_B" "${OFF[@]}")
# one round first, not counted (page cache, the cgroup tree)
"$BUILD/bench/launch_floor" 1 8 "${cmds[@]}" >/dev/null 2>&1
"$BUILD/bench/launch_floor" "$ROUNDS" 8 "${cmds[@]}" >"$tmp" 2>/dev/null
echo "# launch of 8x /bin/true, every binding off, against the fork floor; $ROUNDS rounds ($(env -u OMP_NUM_THREADS nproc) of $(nproc --all) cores usable, $(uname -r))"
awk -v b="$AMLRUN_B" '{ f[NR] = $1; a[NR] = $2; q[NR] = $2 / $1
      if (b != "") { c[NR] = $3; p[NR] = $3 / $1; ab[NR] = $2 / $3 } }
function med(v, n,   i, j, t) {
    for (i = 2; i <= n; i++) { t = v[i]; for (j = i - 1; j > 0 && v[j] > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
    return (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
END {
    printf "%-22s %8.2f ms\n", "fork floor (median)", med(f, NR) * 1000
    printf "%-22s %8.2f ms\n", "amlrun (median)", med(a, NR) * 1000
    if (b != "")
        printf "%-22s %8.2f ms\n", "AMLRUN_B (median)", med(c, NR) * 1000
    printf "%-22s %8.2f\n", "ratio (median)", med(q, NR)
    if (b != "") {
        printf "%-22s %8.2f\n", "AMLRUN_B ratio", med(p, NR)
        printf "%-22s %8.3f\n", "amlrun / AMLRUN_B", med(ab, NR)
    }
}' "$tmp"
