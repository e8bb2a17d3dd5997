#!/usr/bin/env bash
# `make install PREFIX=<dir>` (DESTDIR empty: a user's $HOME/.local), then
# `import amldist` from that prefix's site-packages with no LD_LIBRARY_PATH
# nor AMLDIST_LIBRARY: the module finds the library installed beside it
# (<prefix>/lib from <prefix>/lib/pythonX.Y/site-packages/amldist), and
# when it is not there the ImportError names each place tried (issue 38).
. "$(dirname "$0")/../../lib.sh"
p=$TEST_TMP/prefix
tmake BUILD="$BUILD" lib >/dev/null 2>&1
tmake BUILD="$BUILD" install PREFIX="$p" DESTDIR= >"$TEST_TMP/log" 2>&1
rc=$?
# A plain make puts the build's .pc and CMake files back for its prefix.
tmake BUILD="$BUILD" >/dev/null 2>&1
expect_eq "make install PREFIX=$p (DESTDIR empty): exit 0" "$rc" 0
[ "$rc" = 0 ] || tail -5 "$TEST_TMP/log" | sed 's/^/# /'
pydir=$(ls -d "$p"/lib/python3*/*-packages 2>/dev/null | head -1)
check "the module under the prefix's lib/pythonX.Y" test -f "$pydir/amldist/_lib.py"
version=$(sed -n 's/^#define AMLDIST_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)/\2/p' \
    "$TOP/include/amldist.h" | paste -sd.)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$TORCH_PY
got=$(cd "$TEST_TMP" && env -u AMLDIST_LIBRARY -u LD_LIBRARY_PATH PYTHONPATH="$pydir" "$PY" -c '
import amldist
print(amldist.library_version(), amldist.layout(env={"RANK": "1", "WORLD_SIZE": "2"}).rank)
from amldist import _lib
print(_lib.lib._cdll._name)' 2>&1)
expect_eq "$PY, PYTHONPATH=the prefix's site-packages: the library found and called" \
    "$got" "$version 1
$p/lib/libamldist.so.1"
if ldconfig -p 2>/dev/null | grep -q 'libamldist\.so\.1 '; then
    skip "the prefix's library gone: the ImportError names what was tried" \
        "libamldist is installed on this machine"
else
    mv "$p/lib/libamldist.so.1" "$p/lib/moved.so.1"
    err=$(cd "$TEST_TMP" && env -u AMLDIST_LIBRARY -u LD_LIBRARY_PATH PYTHONPATH="$pydir" "$PY" -c \
        'import amldist; amldist.library_version()' 2>&1 | tail -1)
    check "the prefix's library gone: the ImportError names the loader and $p/lib" \
        sh -c 'printf "%s\n" "$0" | grep -q "ImportError: amldist: cannot load libamldist.so.1: .*the loader.*; $1/lib/libamldist.so.1: not there.*AMLDIST_LIBRARY"' "$err" "$p"
    [ -n "$err" ] && diag "$err"
fi
