#!/usr/bin/env bash
# make install PREFIX= DESTDIR= after a plain make: the .pc names the install
# prefix (it used to keep the old one), the versioned library and its links,
# the headers, and a program built with pkg-config against the installed tree.
. "$(dirname "$0")/../../lib.sh"
d=$TEST_TMP/dest
tmake BUILD="$BUILD" lib >/dev/null 2>&1
tmake BUILD="$BUILD" install PREFIX=/opt/amldist DESTDIR="$d" >"$TEST_TMP/log" 2>&1
expect_eq "make install PREFIX=/opt/amldist: exit 0" "$?" 0
pc=$d/opt/amldist/lib/pkgconfig/amldist.pc
check "the .pc names the new prefix" grep -qx "prefix=/opt/amldist" "$pc"
check "the .pc names the new libdir" grep -qx "libdir=/opt/amldist/lib" "$pc"
check "libamldist.so links to the soname" test "$(readlink "$d/opt/amldist/lib/libamldist.so")" = libamldist.so.1
check "the static library" test -f "$d/opt/amldist/lib/libamldist.a"
check "the headers" test -f "$d/opt/amldist/include/amldist.h" -a -f "$d/opt/amldist/include/amldist/bootstrap.h"
check "amlrun" test -x "$d/opt/amldist/bin/amlrun"
check "the man pages" test -f "$d/opt/amldist/share/man/man1/amlrun.1"
pydir=$(ls -d "$d"/opt/amldist/lib/python3.*/*-packages 2>/dev/null)
check "the Python module (pure Python) under lib/pythonX.Y" test -f "$pydir/amldist/progress.py"
got=$(cd "$TEST_TMP" && env -u AMLDIST_LIBRARY PYTHONPATH=$pydir "${PYTHON:-python3}" -c \
    'import amldist; print(amldist.__file__.startswith("'"$pydir"'"), amldist.progress(1))' 2>&1)
expect_eq "the installed module imports and amldist.progress works, no library needed" "$got" "True 0"
check "the Python stack hook where amlrun looks for it" test -f "$d/opt/amldist/share/amldist/python/sitecustomize.py"
check "the Python workers' stack guard where amlrun looks for it" test -f "$d/opt/amldist/lib/amldist/stack-guard.so"
check "the guard exports its interposers and nothing else" sh -c \
    "nm -D --defined-only '$d/opt/amldist/lib/amldist/stack-guard.so' | awk '{print \$3}' | sort | tr '\n' ' ' | grep -qx '__sigaction __sysv_signal bsd_signal sigaction signal sigset ssignal sysv_signal '"
check "the bash and zsh completions" test -f "$d/opt/amldist/share/bash-completion/completions/amlrun" -a -f "$d/opt/amldist/share/zsh/site-functions/_amlrun"
# Build against the installed tree the way a user would.
sed "s|^prefix=.*|prefix=$d/opt/amldist|; s|^libdir=.*|libdir=$d/opt/amldist/lib|; s|^includedir=.*|includedir=$d/opt/amldist/include|" \
    "$pc" >"$TEST_TMP/amldist.pc"
# shellcheck disable=SC2046
cc -o "$TEST_TMP/hello" "$TOP/examples/hello.c" $(PKG_CONFIG_PATH=$TEST_TMP pkg-config --cflags --libs amldist) \
    -Wl,-rpath,"$d/opt/amldist/lib" 2>"$TEST_TMP/cc.err"
expect_eq "a program builds with pkg-config against the installed tree" "$?" 0
out=$(RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1234 "$TEST_TMP/hello" 2>&1)
check "and runs with the installed library" sh -c 'echo "$0" | grep -qx "RANK=1"' "$out"
# hwloc and libxml2 are loaded when a topology is (lib/topo/dl.c): the
# library does not need them, and a static program needs only -ldl and
# -lpthread besides (the .pc's Libs.private), as CMake's static target says.
needs=$(readelf -d "$d/opt/amldist/lib/libamldist.so.1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
expect_eq "libamldist.so.1 needs neither hwloc nor libxml2" "$(echo "$needs" | grep -Eo 'hwloc|xml' | head -1)" ""
cat >"$TEST_TMP/topo.c" <<'EOF'
#include <stdio.h>
#include <amldist.h>
int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        amldist_topo_t *t;
        if (amldist_topo_load(&t, argv[i], 0) != 0) {
            fprintf(stderr, "%s\n", amldist_last_error());
            return 1;
        }
        printf("%d\n", amldist_topo_num_gpus(t));
        amldist_topo_free(t);
    }
    return 0;
}
EOF
# shellcheck disable=SC2046
cc -o "$TEST_TMP/topo_static" "$TEST_TMP/topo.c" -I"$d/opt/amldist/include" \
    "$d/opt/amldist/lib/libamldist.a" $(PKG_CONFIG_PATH=$TEST_TMP pkg-config --static --libs-only-l amldist | sed 's/-lamldist//') \
    2>"$TEST_TMP/cc.err"
expect_eq "a program links libamldist.a with pkg-config --static's libraries" "$?" 0
check "it needs neither hwloc nor libxml2" sh -c '! readelf -d "$0" | grep -E "NEEDED.*(hwloc|xml)"' "$TEST_TMP/topo_static"
# An hwloc XML file (hwloc) and an NCCL topology file (libxml2, then hwloc).
out=$("$TEST_TMP/topo_static" "$TOP/tests/topologies/azure-ndm-a100-v4.xml" \
      "$TOP/tests/topologies/real/nccl-topo/aws/p4d-24xl-topo.xml" 2>&1 | tr '\n' ' ')
expect_eq "and loads an hwloc and an NCCL topology through them" "$out" "8 8 "
# make uninstall takes away everything make install put there: no file is
# left, whatever was built (amldist-nccl-check only with NCCL), and the
# directories that install made for us alone go too.
tmake BUILD="$BUILD" uninstall PREFIX=/opt/amldist DESTDIR="$d" >"$TEST_TMP/log" 2>&1
expect_eq "make uninstall: exit 0" "$?" 0
left=$(cd "$d" && find . -type f -o -type l | sort | tr '\n' ' ')
expect_eq "make uninstall leaves no file behind" "$left" ""
# (the make and the look at the build's .pc under one lock: see tmake)
check "a plain make puts the build's .pc back to its own prefix" \
    flock "$TOP/Makefile" sh -c 'make -s -C "$0" BUILD="$1" lib >/dev/null 2>&1 &&
        grep -qx "prefix=/usr/local" "$1/lib/pkgconfig/amldist.pc"' "$TOP" "$BUILD"
