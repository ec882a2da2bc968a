#!/usr/bin/env bash
# `make python`: makes `import memwall` work in memwall's Python environment
# from any directory, with the extension memwall_core this checkout built
# (docs/python.md). Writes memwall.pth into the environment's site-packages
# naming this checkout's python/ and BUILD/python (an editable install:
# a change to the package needs no reinstall, a change to the C++ side a
# rebuild); another checkout's `make python` points it there instead.
#
#   scripts/install-python.sh BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:?usage: scripts/install-python.sh BUILD_DIR}" && pwd)
python=$("$root/scripts/install-deps.sh" --print-python)
[[ -x "$python" ]] || { echo "install-python: no Python environment at $python (scripts/install-deps.sh --torch)" >&2; exit 2; }
ls "$build"/python/memwall_core*.so >/dev/null 2>&1 ||
  { echo "install-python: $build/python has no memwall_core (its build needs nanobind in $python: scripts/install-deps.sh --torch)" >&2; exit 2; }
site=$("$python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
tmp=$(mktemp "$site/.memwall.pth.XXXXXX")
trap 'rm -f "$tmp"' EXIT
printf '%s\n%s\n' "$root/python" "$build/python" >"$tmp"
chmod 644 "$tmp"
mv "$tmp" "$site/memwall.pth"
trap - EXIT
(cd / && "$python" -c "import memwall, memwall_core; print('install-python: import memwall works in', memwall.__file__.rsplit('/', 2)[0], 'with', memwall_core.__file__)")
