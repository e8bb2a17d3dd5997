#!/usr/bin/env bash
# dpkg-buildpackage -us -uc -b on a copy of the tree: the packages and what
# each holds (dpkg -c), lintian without errors, the symbols file against the
# library's exports, amlrun and a program built against the packaged library
# run out of dpkg -x trees (nothing is installed on the machine), and an
# ABI change (a symbol gone, a symbol new) fails the build.
# amldist-test: slow (a whole package build)
. "$(dirname "$0")/../../lib.sh"
for t in dpkg-buildpackage dh lintian fakeroot; do
    if ! have $t; then skip "debian packages" "$t not installed (scripts/install-deps.sh)"; exit 0; fi
done
src=$TEST_TMP/src out=$TEST_TMP
mkdir -p "$src"
# The tree as it is, committed or not; none of its builds.
if git -C "$TOP" rev-parse --git-dir >/dev/null 2>&1; then
    (cd "$TOP" && git ls-files -co --exclude-standard -z | tar --null -cf - -T -) | tar -xf - -C "$src"
else
    (cd "$TOP" && tar --exclude='./build' --exclude='./build-*' -cf - .) | tar -xf - -C "$src"
fi
ver=$(cd "$src" && dpkg-parsechangelog -S Version)
want=$(sed -n 's/^#define AMLDIST_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$TOP/include/amldist.h" | paste -sd.)
expect_eq "debian/changelog's version is the header's" "$ver" "$want"
arch=$(dpkg-architecture -qDEB_HOST_ARCH) ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
# The system's tools only, as a Debian build machine has them (pybuild would
# take a pyenv's python3 first in PATH).
sysenv=(env PATH=/usr/sbin:/usr/bin:/sbin:/bin)
(cd "$src" && "${sysenv[@]}" dpkg-buildpackage -us -uc -b -j2) \
    >"$TEST_TMP/build.log" 2>&1
rc=$?
expect_eq "dpkg-buildpackage -us -uc -b: exit 0" "$rc" 0
[ "$rc" = 0 ] || { tail -30 "$TEST_TMP/build.log" | sed 's/^/# /'; exit 0; }
deb() { local a=$arch; [ "$1" != python3-amldist ] || a=all; echo "$out/$1_${ver}_$a.deb"; }
pkgs="libamldist1 libamldist-dev amlrun"
# The Python module joins when the tree has it.
[ -e "$TOP/python/pyproject.toml" ] && pkgs="$pkgs python3-amldist"
for p in $pkgs; do check "package $p" test -f "$(deb "$p")"; done
lst() { dpkg -c "$(deb "$1")" | awk '{ print $6 }' | sed 's|^\./|/|; s|/$||'; }
has() { lst "$1" | grep -qx "$2"; }

# libamldist1: the shared library, nothing a second soname would clash with.
expect_eq "libamldist1: the library and its docs only" \
    "$(lst libamldist1 | grep -v '^/usr/share/doc/libamldist1\|^/usr/lib/'"$ma"'$\|^/usr/lib$\|^/usr\(/share\(/doc\)\?\)\?$\|^$')" \
    "/usr/lib/$ma/libamldist.so.1"
# libamldist-dev: headers, static library, .so link, .pc, CMake, section 3.
for f in /usr/include/amldist.h /usr/include/amldist/topo.h /usr/include/amldist/rdzv.h \
         /usr/include/amldist/bootstrap.h /usr/lib/$ma/libamldist.a /usr/lib/$ma/libamldist.so \
         /usr/lib/$ma/pkgconfig/amldist.pc /usr/lib/$ma/cmake/amldist/amldistConfig.cmake \
         /usr/lib/$ma/cmake/amldist/amldistConfigVersion.cmake /usr/share/man/man3/libamldist.3.gz; do
    check "libamldist-dev: $f" has libamldist-dev "$f"
done
# amlrun: the launcher, the tools, their pages, the Python workers' stack
# hook and guard (where amlrun looks for them: BINDIR/../share/amldist/python
# and BINDIR/../lib/amldist), the completion once the tree generates it.
for f in /usr/bin/amlrun /usr/share/man/man1/amlrun.1.gz /usr/share/man/man7/amldist-env.7.gz \
         /usr/share/amldist/python/sitecustomize.py /usr/lib/amldist/stack-guard.so; do
    check "amlrun: $f" has amlrun "$f"
done
if grep -q 'completion' "$TOP/Makefile"; then
    check "amlrun: bash completion" has amlrun /usr/share/bash-completion/completions/amlrun
    check "amlrun: zsh completion" has amlrun /usr/share/zsh/vendor-completions/_amlrun
else
    skip "amlrun: completion" "the tree does not generate it yet"
fi
for p in libamldist-dev amlrun; do
    if lst "$p" | grep -q '/libamldist\.so\.1$'; then fail "$p: no copy of the shared library"
    else ok "$p: no copy of the shared library"; fi
done
# amlrun calls the newest of the control plane's calls, AMLDIST_1.5's
# amldist_rdzv_join_status (the status of a job another node's failure
# ended before this node's round):
# dpkg-shlibdeps takes the version from the symbols file.
check "amlrun needs libamldist1 (>= 1.5.0, for AMLDIST_1.5)" \
    sh -c "dpkg-deb -f '$(deb amlrun)' Depends | grep -q 'libamldist1 (>= 1\\.5\\.0)'"

# lintian: no errors (warnings are printed for the record).
lintian --allow-root "$out"/*.changes >"$TEST_TMP/lintian" 2>&1
sed 's/^/# lintian: /' "$TEST_TMP/lintian" | head -20
expect_eq "lintian: no errors" "$(grep -c '^E:' "$TEST_TMP/lintian")" 0

# Out of dpkg -x trees: amlrun runs a program built against the packaged
# library; its pages open; the CMake package and the .pc work from there.
x=$TEST_TMP/x
for p in $pkgs; do dpkg -x "$(deb "$p")" "$x"; done
lib=$(ldd "$x/usr/bin/amlrun" | sed -n 's/^\tlibamldist.so.1 => \(.*\) (0x.*/\1/p')
expect_eq "amlrun takes the library of its own tree (\$ORIGIN/../lib/$ma)" \
    "$(readlink -f "$lib")" "$x/usr/lib/$ma/libamldist.so.1"
cc -o "$TEST_TMP/hello" "$TOP/examples/hello.c" -I"$x/usr/include" -L"$x/usr/lib/$ma" -lamldist \
    -Wl,-rpath,"$x/usr/lib/$ma" 2>"$TEST_TMP/cc.err"
expect_eq "hello builds against the packaged library" "$?" 0
port=$((20000 + RANDOM % 10000))
timeout 120 "$x/usr/bin/amlrun" --nproc-per-node 2 --master-port $port --cpu-bind none "$TEST_TMP/hello" \
    >"$TEST_TMP/run" 2>&1
expect_eq "the packaged amlrun runs it: exit 0" "$?" 0
expect_eq "the packaged amlrun runs it: ranks" "$(sed -n 's/^RANK=//p' "$TEST_TMP/run" | sort | tr '\n' ' ')" "0 1 "
if have mpirun; then
    timeout 120 $MPIRUN -np 2 "$x/usr/bin/amlrun" --cpu-bind none "$TEST_TMP/hello" >"$TEST_TMP/run" 2>&1
    expect_eq "mpirun -np 2 the packaged amlrun (in place): ranks" \
        "$(sed -n 's/^RANK=//p' "$TEST_TMP/run" | sort | tr '\n' ' ')" "0 1 "
fi
check "man amldist_init from the tree: a link to libamldist(3)" \
    test "$(readlink "$x/usr/share/man/man3/amldist_init.3.gz")" = libamldist.3.gz
expect_eq "man -w amldist_init from the tree" \
    "$(cd / && MANPATH=$x/usr/share/man man -w amldist_init)" "$x/usr/share/man/man3/libamldist.3.gz"
check "and it opens libamldist(3)" sh -c "cd / && MANPATH='$x/usr/share/man' man amldist_init 2>/dev/null | grep -q LIBAMLDIST"
if have cmake; then
    mkdir -p "$TEST_TMP/cm"
    printf '%s\n' 'cmake_minimum_required(VERSION 3.25)' 'project(hello C)' \
        'find_package(amldist 1.0 CONFIG REQUIRED)' "add_executable(hello \"$TOP/examples/hello.c\")" \
        'target_link_libraries(hello PRIVATE amldist::amldist)' >"$TEST_TMP/cm/CMakeLists.txt"
    cmake -S "$TEST_TMP/cm" -B "$TEST_TMP/cm/b" -DCMAKE_PREFIX_PATH="$x/usr" >"$TEST_TMP/cm.log" 2>&1 &&
        cmake --build "$TEST_TMP/cm/b" >>"$TEST_TMP/cm.log" 2>&1
    expect_eq "the packaged CMake package builds hello from the tree" "$?" 0
    out1=$(RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1234 "$TEST_TMP/cm/b/hello" 2>&1)
    check "and it runs" sh -c 'echo "$0" | grep -qx "RANK=1"' "$out1"
fi
# shellcheck disable=SC2046
cc -o "$TEST_TMP/hello_pc" "$TOP/examples/hello.c" $(PKG_CONFIG_SYSROOT_DIR=$x \
    PKG_CONFIG_LIBDIR=$x/usr/lib/$ma/pkgconfig:/usr/lib/$ma/pkgconfig:/usr/share/pkgconfig pkg-config --cflags --libs amldist) 2>"$TEST_TMP/cc.err"
expect_eq "the packaged .pc builds hello (PKG_CONFIG_SYSROOT_DIR)" "$?" 0

# python3-amldist: the module, run by the packaged amlrun over the packaged
# library (LD_LIBRARY_PATH: the loader's way to a tree not installed).
if [ -e "$TOP/python/pyproject.toml" ]; then
    check "python3-amldist: the module" has python3-amldist /usr/lib/python3/dist-packages/amldist/__init__.py
    check "python3-amldist needs libamldist1" \
        sh -c "dpkg-deb -f '$(deb python3-amldist)' Depends | grep -q 'libamldist1'"
    check "python3-amldist: the unit tests ran in the build" grep -q '^Ran [1-9][0-9]* test' "$TEST_TMP/build.log"
    timeout 120 env PYTHONPATH="$x/usr/lib/python3/dist-packages" LD_LIBRARY_PATH="$x/usr/lib/$ma" \
        "$x/usr/bin/amlrun" --nproc-per-node 2 --master-port $((port + 1)) --cpu-bind none \
        /usr/bin/python3 -c 'import amldist; l = amldist.layout(); print("RANK=%d %s %s" % (l.rank, l.launcher, amldist.__file__))' \
        >"$TEST_TMP/py" 2>&1
    expect_eq "python3-amldist under the packaged amlrun: exit 0" "$?" 0
    expect_eq "python3-amldist under the packaged amlrun: ranks, the tree's module" \
        "$(sed -n 's/^RANK=//p' "$TEST_TMP/py" | sort)" \
        "$(printf '%s\n' "0 amlrun $x/usr/lib/python3/dist-packages/amldist/__init__.py" "1 amlrun $x/usr/lib/python3/dist-packages/amldist/__init__.py")"
fi

# The symbols file: every function the packaged library exports, with its
# version node; every symbol it requires (not tagged "(optional)") exported.
exported=$(nm -D --defined-only "$x/usr/lib/$ma/libamldist.so.1" | awk '$2 == "T" { print $3 }' | sed 's/@@/@/' | sort)
check "libamldist1 ships its symbols file" sh -c "dpkg-deb -I '$(deb libamldist1)' symbols | grep -q '^libamldist.so.1 libamldist1 #MINVER#'"
symfile=$(cat "$src/debian/libamldist1.symbols")
listed=$(echo "$symfile" | awk '/^ / { sub(/^\([^)]*\)/, "", $1); if ($1 ~ /^amldist_/) print $1 }' | sort)
required=$(echo "$symfile" | awk '/^ amldist_/ { print $1 }' | sort)
expect_eq "the symbols file lists every exported function with its version" \
    "$(comm -23 <(echo "$exported") <(echo "$listed") | tr '\n' ' ')" ""
expect_eq "every symbol it requires is exported" \
    "$(comm -13 <(echo "$exported") <(echo "$required") | tr '\n' ' ')" ""
diag "symbols: $(echo "$exported" | wc -l) exported, $(echo "$required" | wc -l) required, $(echo "$listed" | wc -l) listed"

# An ABI change fails the build: a symbol the symbols file has not heard
# of, and a function the map hides (gone from the library).  The second
# is the arch-dependent half of the build (binary-arch: libamldist1 and
# its symbols, not the Python module) without the Python unit tests
# (nocheck), both of which the whole build above ran: dpkg-gensymbols
# fails the same.
# The symbols file first: it is no input of the build, so the library
# built and installed above into debian/libamldist1/ serves as it is, and
# only debian/rules' own dh_makeshlibs step runs again (its -c4 is what
# is checked; the whole binary-arch sequence before it, install, strip
# and dwz of what is already there, cost 4 s of CPU more for nothing).
abienv=("${sysenv[@]}" DEB_BUILD_OPTIONS="nocheck parallel=2")
sed -i '/amldist_rank@AMLDIST_1.0/d' "$src/debian/libamldist1.symbols"
(cd "$src" && "${abienv[@]}" fakeroot debian/rules override_dh_makeshlibs) >"$TEST_TMP/abi-new.log" 2>&1
expect_eq "a symbol missing from the symbols file: the build fails" "$?" 2
check "dpkg-gensymbols names it" grep -q -- '^+ *amldist_rank@AMLDIST_1.0' "$TEST_TMP/abi-new.log"
cp "$TOP/debian/libamldist1.symbols" "$src/debian/libamldist1.symbols"
sed -i 's/^    local:$/&\n        amldist_envp_unset;/' "$src/lib/amldist.map"
rm -rf "$src/debian/debhelper-build-stamp" "$src/.pybuild"
(cd "$src" && "${abienv[@]}" fakeroot debian/rules binary-arch) >"$TEST_TMP/abi-gone.log" 2>&1
expect_eq "amldist_envp_unset hidden: the build fails" "$?" 2
check "dpkg-gensymbols says the symbol disappeared" grep -q -- '^- *amldist_envp_unset@AMLDIST_1.0' "$TEST_TMP/abi-gone.log"
