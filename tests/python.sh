# shellcheck shell=bash
# Shared setup of the Python module's shell tests (tests/sh/python/*.sh):
# sourced after lib.sh.  The module is installed as a user installs it, with
# pip, offline, into a target ($PY_SITE), from a copy of python/ (a build
# writes into its source folder); the library is the build's, found through
# AMLDIST_LIBRARY.  Skips the whole test, with the reason, where the
# interpreter or pip is missing.

# py_setup [fresh]: $PY_SITE holds the installed module, or "ok - ... #
# SKIP".  With "fresh" (python_pip.sh, whose check the install is) pip
# installs into the test's scratch folder; otherwise the tests share one
# install per interpreter and content of python/, in
# $BUILD/python-site/KEY, which the first of them makes under a lock (pip
# costs about a second of CPU, and the others only import the module).
py_setup() {
    local name key rc=0
    name="python ($(basename "$0" .sh))"
    if [ ! -f "$BUILD/lib/libamldist.so.1" ]; then
        fail "$name: $BUILD/lib/libamldist.so.1 is built"
        exit 1
    fi
    if [ "${1:-}" = fresh ]; then
        PY_SITE=$TEST_TMP/site
        py_install "$name" "$PY_SITE" || rc=$?
    else
        key=$({ readlink -f "$TORCH_PY"
                cd "$TOP/python" && find . \( -name __pycache__ -o -name build -o -name '*.egg-info' \) \
                    -prune -o -type f -print | LC_ALL=C sort | xargs -d '\n' sha1sum
              } | sha1sum | cut -c1-16)
        PY_SITE=$BUILD/python-site/$key
        mkdir -p "$BUILD/python-site"
        (
            flock 9 || exit 1
            [ -e "$PY_SITE/.installed" ] && exit 0
            py_install "$name" "$PY_SITE.new" || exit
            : >"$PY_SITE.new/.installed"
            mv "$PY_SITE.new" "$PY_SITE"
        ) 9>"$BUILD/python-site/.lock" || rc=$?
    fi
    case $rc in
        0) ;;
        77) skip "$name" "$TORCH_PY has no pip (python3-pip: scripts/install-deps.sh)"; exit 0 ;;
        *) exit 1 ;;
    esac
    export AMLDIST_LIBRARY=$BUILD/lib/libamldist.so.1
    # No __pycache__ in the checkout (python/tests runs from there).
    export PYTHONDONTWRITEBYTECODE=1
    export PYTHONPATH=$PY_SITE${PYTHONPATH:+:$PYTHONPATH}
}

# py_has_torch: the interpreter has torch.distributed (have_torch, tests/lib.sh).
py_has_torch() { have_torch torch.distributed; }

# py_install NAME TARGET: pip installs a copy of python/ into TARGET; 77
# where the interpreter has no pip, 1 (a failed case printed) where pip
# fails.
py_install() {
    local name=$1 target=$2
    "$TORCH_PY" -m pip --version >/dev/null 2>&1 || return 77
    rm -rf "$TEST_TMP/src" "$target"
    cp -r "$TOP/python" "$TEST_TMP/src"
    rm -rf "$TEST_TMP/src/build" "$TEST_TMP/src"/*.egg-info
    if ! "$TORCH_PY" -m pip install -q --no-deps --no-build-isolation --no-index \
        --target "$target" "$TEST_TMP/src" >"$TEST_TMP/pip.log" 2>&1; then
        fail "$name: pip install --no-build-isolation --no-index ./python"
        sed 's/^/# /' "$TEST_TMP/pip.log" | tail -n 20
        return 1
    fi
}
