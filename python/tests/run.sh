#!/bin/sh
# The Python package's unit tests (python/tests) as one ctest,
# PythonPackage.Pytest (tests/CMakeLists.txt): pytest under memwall's Python
# environment, from the repository root, leaving no __pycache__ nor
# .pytest_cache in the tree. Its summary line also goes to SUMMARY_FILE,
# which `make test` prints after ctest. Exit code 77 (ctest's skip) when
# the environment or its pytest is missing. BUILD_DIR holds the extension
# memwall_core (BUILD_DIR/python) and the memwall binary that the tests of
# the Python API use (python/tests/test_estimate.py).
#
#   python/tests/run.sh PYTHON SUMMARY_FILE [BUILD_DIR]
python=$1
summary=$2
if [ -n "$3" ]; then
  export MEMWALL_CORE_DIR="$3/python" MEMWALL_BINARY="$3/memwall"
fi
cd "$(dirname "$0")/../.." || exit 1
skip() {
  echo "SKIP: $1" | tee "$summary"
  exit 77
}
[ -x "$python" ] || skip "no Python at $python (scripts/install-deps.sh --torch makes memwall's environment): python/tests did not run"
"$python" -c "import torch" 2>/dev/null || skip "no torch in $python (scripts/install-deps.sh --torch): python/tests did not run"
"$python" -c "import pytest" 2>/dev/null || skip "no pytest in $python (scripts/install-deps.sh --torch installs it): python/tests did not run"
log=$(mktemp) || exit 1
PYTHONDONTWRITEBYTECODE=1 "$python" -m pytest python/tests -q -p no:cacheprovider >"$log" 2>&1
code=$?
cat "$log"
echo "python/tests (pytest): $(grep -E '[0-9]+ (passed|failed|error)' "$log" | tail -1)" >"$summary"
rm -f "$log"
exit $code
