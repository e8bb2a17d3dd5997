# shellcheck shell=bash
# Shared setup of the Python module's shell tests (tests/sh/python/*.sh):
# sourced after lib.sh.  The module is installed as a user installs it, with
# pip, offline, into a scratch target ($PY_SITE), from a copy of python/
# (a build writes into its source folder); the library is the build's,
# found through AMLDIST_LIBRARY.  Skips the whole test, with the reason,
# where the interpreter or pip is missing.

# py_setup: $PY_SITE holds the installed module, or "ok - ... # SKIP".
py_setup() {
    local name
    name="python ($(basename "$0" .sh))"
    if [ ! -f "$BUILD/lib/libamldist.so.1" ]; then
        fail "$name: $BUILD/lib/libamldist.so.1 is built"
        exit 1
    fi
    if ! "$TORCH_PY" -m pip --version >/dev/null 2>&1; then
        skip "$name" "$TORCH_PY has no pip (python3-pip: scripts/install-deps.sh)"
        exit 0
    fi
    cp -r "$TOP/python" "$TEST_TMP/src"
    rm -rf "$TEST_TMP/src/build" "$TEST_TMP/src"/*.egg-info
    PY_SITE=$TEST_TMP/site
    if ! "$TORCH_PY" -m pip install -q --no-deps --no-build-isolation --no-index \
        --target "$PY_SITE" "$TEST_TMP/src" >"$TEST_TMP/pip.log" 2>&1; then
        fail "$name: pip install --no-build-isolation --no-index ./python"
        sed 's/^/# /' "$TEST_TMP/pip.log" | tail -n 20
        exit 1
    fi
    export AMLDIST_LIBRARY=$BUILD/lib/libamldist.so.1
    # No __pycache__ in the checkout (python/tests runs from there).
    export PYTHONDONTWRITEBYTECODE=1
    export PYTHONPATH=$PY_SITE${PYTHONPATH:+:$PYTHONPATH}
}

# py_has_torch: the interpreter has torch.distributed (tests/torch.sh).
. "$TOP/tests/torch.sh"
py_has_torch() { have_torch torch.distributed; }
