#!/usr/bin/env bash
# The Python module as a package: pip installs it offline from python/ with
# Debian's setuptools (no build isolation, no index), the wheel Debian's
# pybuild builds holds the module alone, its version is the library's, and
# the library is found as documented: AMLDIST_LIBRARY, else the soname
# through the dynamic loader (LD_LIBRARY_PATH), else the checkout's build;
# a missing one is an ImportError, at the first call that needs it (import
# itself works: amldist.progress needs no library), that says how to fix it.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/python.sh"
py_setup fresh
ok "pip install --no-deps --no-build-isolation --no-index ./python (offline, Debian's setuptools)"
files=$(cd "$PY_SITE" && find amldist -name '*.py' | sort | tr '\n' ' ')
want=$(cd "$TOP/python" && find amldist -name '*.py' | sort | tr '\n' ' ')
expect_eq "the installed package is python/amldist, no more" "$files" "$want"

hdr() { sed -n "s/^#define AMLDIST_VERSION_$1 \([0-9]*\)$/\1/p" "$TOP/include/amldist.h"; }
version=$(hdr MAJOR).$(hdr MINOR).$(hdr PATCH)
got=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$TOP/python/pyproject.toml")
expect_eq "pyproject.toml's version is the library's (include/amldist.h)" "$got" "$version"
got=$(cd "$TEST_TMP" && "$TORCH_PY" -c 'import amldist; print(amldist.__version__, amldist.library_version())')
expect_eq "amldist.__version__ and the loaded library's version" "$got" "$version $version"

# The soname through the dynamic loader, from the installed copy (no
# checkout beside it to fall back on).
got=$(cd "$TEST_TMP" && env -u AMLDIST_LIBRARY LD_LIBRARY_PATH="$BUILD/lib" "$TORCH_PY" -c \
    'import amldist; print(amldist.layout(env={"RANK": "1", "WORLD_SIZE": "2"}).rank)' 2>&1)
expect_eq "found by its soname on LD_LIBRARY_PATH, without AMLDIST_LIBRARY" "$got" 1
if ldconfig -p 2>/dev/null | grep -q 'libamldist\.so\.1 '; then
    skip "no library anywhere: an ImportError that says how to fix it" "libamldist is installed on this machine"
else
    err=$(cd "$TEST_TMP" && env -u AMLDIST_LIBRARY -u LD_LIBRARY_PATH "$TORCH_PY" -c 'import amldist; amldist.layout()' 2>&1)
    check "no library anywhere: an ImportError that says how to fix it" \
        sh -c 'printf "%s\n" "$0" | grep -q "ImportError: amldist: cannot load libamldist.so.1: .*AMLDIST_LIBRARY"' "$err"
    got=$(cd "$TEST_TMP" && env -u AMLDIST_LIBRARY -u LD_LIBRARY_PATH "$TORCH_PY" -c \
        'import amldist; print(amldist.progress(1))' 2>&1)
    expect_eq "no library anywhere: import amldist and amldist.progress work" "$got" 0
fi
err=$(cd "$TEST_TMP" && AMLDIST_LIBRARY=$TEST_TMP/nothere.so "$TORCH_PY" -c 'import amldist; amldist.layout()' 2>&1)
check "AMLDIST_LIBRARY naming no file: an ImportError naming it, nothing else tried" \
    sh -c 'printf "%s\n" "$0" | grep -q "cannot load libamldist.so.1: $1.*check AMLDIST_LIBRARY"' "$err" "$TEST_TMP/nothere.so"
# Something else under that name (not a shared library).
err=$(cd "$TEST_TMP" && AMLDIST_LIBRARY=$TOP/README.md "$TORCH_PY" -c 'import amldist; amldist.layout()' 2>&1)
check "AMLDIST_LIBRARY naming a file that is no library: an ImportError" \
    sh -c 'printf "%s\n" "$0" | grep -q "ImportError: amldist: cannot load"' "$err"

# Another shared library under that name.
libc=$("$TORCH_PY" -c 'import ctypes.util; print(ctypes.util.find_library("c"))')
err=$(cd "$TEST_TMP" && AMLDIST_LIBRARY=$libc "$TORCH_PY" -c 'import amldist; amldist.layout()' 2>&1)
check "AMLDIST_LIBRARY naming another library ($libc): an ImportError saying so" \
    sh -c 'printf "%s\n" "$0" | grep -q "ImportError: amldist: cannot load libamldist.so.1: $1: not libamldist"' "$err" "$libc"

# In the checkout (PYTHONPATH=python after make), the build's library.
if [ "$BUILD" -ef "$TOP/build" ]; then
    got=$(cd "$TEST_TMP" && env -u AMLDIST_LIBRARY -u LD_LIBRARY_PATH PYTHONPATH="$TOP/python" "$TORCH_PY" -c \
        'import amldist; print(amldist.__file__.startswith("'"$TOP"'/python/"), amldist.library_version())' 2>&1)
    expect_eq "in the checkout: PYTHONPATH=python finds build/lib" "$got" "True $version"
else
    skip "in the checkout: PYTHONPATH=python finds build/lib" "BUILD=$BUILD is not the checkout's build/"
fi

# The wheel as Debian's pybuild (pyproject plugin) builds it: python3 -m
# build --no-isolation --wheel, offline.
if "$TORCH_PY" -c 'import build' 2>/dev/null; then
    cp -r "$TOP/python" "$TEST_TMP/wsrc"
    rm -rf "$TEST_TMP/wsrc/build" "$TEST_TMP/wsrc"/*.egg-info
    (cd "$TEST_TMP/wsrc" && "$TORCH_PY" -m build --no-isolation --wheel --outdir "$TEST_TMP/dist" . \
        >"$TEST_TMP/build.log" 2>&1)
    expect_eq "python3 -m build --no-isolation --wheel (pybuild's way): exit 0" "$?" 0
    got=$("$TORCH_PY" -c 'import sys, zipfile; print(" ".join(sorted(n for n in zipfile.ZipFile(sys.argv[1]).namelist() if not ".dist-info/" in n)))' \
        "$TEST_TMP"/dist/amldist-"$version"-py3-none-any.whl 2>&1)
    expect_eq "the wheel is pure Python (py3-none-any) and holds amldist/ alone" "$got " "$want"
else
    skip "python3 -m build --no-isolation --wheel (pybuild's way)" "no python3-build"
fi

# Debian's pybuild itself (dh-python, pyproject plugin): build, install
# into a tree, and run the unit tests the way debian/rules can
# (PYBUILD_BEFORE_TEST copies python/tests beside the built module).
if have pybuild; then
    cp -r "$TOP/python" "$TEST_TMP/psrc"
    rm -rf "$TEST_TMP/psrc/build" "$TEST_TMP/psrc"/*.egg-info
    # Debian's interpreters, whatever else PATH puts first.
    (cd "$TEST_TMP/psrc" && export PATH=/usr/bin:$PATH &&
        pybuild --build -s pyproject --dest-dir "$TEST_TMP/pdest" &&
        pybuild --install -s pyproject --dest-dir "$TEST_TMP/pdest") >"$TEST_TMP/pybuild.log" 2>&1
    expect_eq "pybuild --build, --install (python3-amldist's way): exit 0" "$?" 0
    got=$(cd "$TEST_TMP/pdest" && find usr/lib/python3*/dist-packages/amldist -name '*.py' 2>/dev/null |
        sed 's|^usr/lib/python3[^/]*/dist-packages/||' | sort | tr '\n' ' ')
    expect_eq "pybuild installs amldist/ into dist-packages" "$got" "$want"
    (cd "$TEST_TMP/psrc" && unset PYTHONPATH && export PATH=/usr/bin:$PATH AMLRUN AMLDIST_TOPOLOGIES=$TOP/tests/topologies/real \
        PYBUILD_BEFORE_TEST='cp -r {dir}/tests {build_dir}' PYBUILD_AFTER_TEST='rm -rf {build_dir}/tests' \
        PYBUILD_TEST_ARGS='-s tests -t tests' && pybuild --test -s pyproject) >"$TEST_TMP/pytest.log" 2>&1
    rc=$?
    ran=$(sed -n 's/^Ran \([0-9]*\) tests.*/\1/p' "$TEST_TMP/pytest.log" | head -n 1)
    check "pybuild --test runs python/tests against the built library (exit 0, ${ran:-no} tests)" \
        test "$rc" = 0 -a "${ran:-0}" -gt 0
else
    skip "pybuild --build, --install (python3-amldist's way)" "no dh-python"
fi
