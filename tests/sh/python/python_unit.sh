#!/usr/bin/env bash
# The Python module's unit tests (python/tests/, unittest) over the real
# library, one line each, run from the pip-installed module: layout() and
# its errors, export() into a mapping and into os.environ, binding() beside
# amlrun's own plans over the hwloc XML files of real machines.
. "$(dirname "$0")/../../lib.sh"
. "$TOP/tests/python.sh"
py_setup
cd "$TEST_TMP" || exit 1
AMLRUN=$AMLRUN AMLDIST_TOPOLOGIES=$TOP/tests/topologies/real \
    "$TORCH_PY" - "$TOP/python/tests" "$PY_SITE" <<'PY'
import sys, unittest
start, site = sys.argv[1], sys.argv[2]
import amldist
# The installed module is the one under test, not the checkout's.
assert amldist.__file__.startswith(site), amldist.__file__

class TAP(unittest.TestResult):
    def addSuccess(self, test):
        print(f"ok - {test.id()}", flush=True)

    def addFailure(self, test, err):
        print(f"not ok - {test.id()}")
        for line in self._exc_info_to_string(err, test).splitlines():
            print(f"# {line}")
        sys.stdout.flush()

    addError = addFailure

    def addSkip(self, test, reason):
        print(f"ok - {test.id()} # SKIP {reason}", flush=True)

result = TAP()
suite = unittest.defaultTestLoader.discover(start, top_level_dir=start)
if suite.countTestCases() == 0:
    print("not ok - python/tests has unit tests")
suite.run(result)
sys.exit(0 if result.wasSuccessful() else 1)
PY
