#!/usr/bin/env bash
# `make python` (and `make test` before its tests): installs the package
# memwall into memwall's Python environment as `pip install ./python` does
# (python/pyproject.toml: scikit-build-core over the project's CMake), but
# with the wheel built in BUILD_DIR, the directory `make build` made, so
# that nothing is compiled twice (docs/python.md). `import memwall` then
# works from any directory, with memwall_core, the executor and the memwall
# command of this checkout.
#
#   scripts/install-python.sh BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:?usage: scripts/install-python.sh BUILD_DIR}" && pwd)
python=$("$root/scripts/install-deps.sh" --print-python)
[[ -x "$python" ]] || { echo "install-python: no Python environment at $python (scripts/install-deps.sh --torch)" >&2; exit 2; }
ls "$build"/python/memwall_core*.so >/dev/null 2>&1 ||
  { echo "install-python: $build/python has no memwall_core (its build needs nanobind in $python: scripts/install-deps.sh --torch)" >&2; exit 2; }
"$python" -c "import scikit_build_core" 2>/dev/null ||
  { echo "install-python: no scikit-build-core in $python (scripts/install-deps.sh --torch)" >&2; exit 2; }
site=$("$python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
rm -f "$site/memwall.pth"  # an editable install of an earlier memwall
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# The build directory's generator and make program (scikit-build-core would
# pick ninja), and the cache entries scikit-build-core adds taken out
# again afterwards, so that `make build` configures as before.
if ! CMAKE_GENERATOR="Unix Makefiles" SKBUILD_BUILD_DIR="$build" \
     SKBUILD_CMAKE_ARGS="-DCMAKE_MAKE_PROGRAM=$(command -v make)" \
     "$python" -m pip install --no-build-isolation --no-deps --quiet --disable-pip-version-check \
       --no-input "$root/python" >"$log" 2>&1; then
  cat "$log" >&2
  echo "install-python: pip install ./python failed" >&2
  exit 1
fi
cmake -U 'SKBUILD*' -U CMAKE_MODULE_PATH -U CMAKE_PREFIX_PATH -U CMAKE_FIND_ROOT_PATH_MODE_PACKAGE \
  -C /dev/null "$build" >/dev/null 2>&1 || true
rm -f "$build/CMakeInit.txt"
(cd / && "$python" -c "import memwall, memwall_core; print('install-python: import memwall works in', memwall.__file__.rsplit('/', 2)[0], 'with', memwall_core.__file__)")
