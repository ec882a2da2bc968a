#!/usr/bin/env bash
# Makes the GPU check kit (docs/gpu.md): one folder, under 60 MiB, with what a
# GPU machine without network or Debian's development packages needs to
# build memwall and run scripts/gpu-check.sh there:
#   the checkout's files (tracked and untracked, not ignored);
#   deps/: the header-only libraries (nlohmann JSON, CLI11, {fmt}), liburing's
#     headers and static library and GoogleTest's source, copied from this
#     machine's packages, with their copyright files
#     (Note [Dependencies from a kit] in CMakeLists.txt);
#   inputs/plans/: the plans that need CBC, which the kit's build leaves out,
#     made here by the tests that run them (Note [Plans from the kit] in
#     tests/exec/run_test.cc);
#   KIT.json: the commit, the date, what is in it and the torch it was made with.
#
#   scripts/gpu-kit.sh [--build DIR] [--check-cpu WORK] OUT_DIR
#
# --build: the Release build whose test_exec makes the plans (default build,
# `make build`). --check-cpu WORK: then runs the kit's gpu-check.sh --cpu in
# a clean environment (env -i) with another PyTorch than the pinned one (a
# second virtual environment, scripts/install-deps.sh --other-torch), its
# report in WORK/report: what `make gpu-kit-check` does.
# OUT_DIR must not exist; it appears whole or not at all.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$root/build"
check_dir=""
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="${2:-}"; shift ;;
    --check-cpu) check_dir="${2:-}"; shift ;;
    -h|--help) sed -n 2,24p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu-kit: unknown option '$1' (known: --build DIR, --check-cpu WORK)" >&2; exit 2 ;;
    *) [[ -z "$out" ]] || { echo "gpu-kit: one OUT_DIR, not '$out' and '$1'" >&2; exit 2; }
       out="$1" ;;
  esac
  shift
done
die() { echo "gpu-kit: $*" >&2; exit 2; }
[[ -n "$out" ]] || die "usage: scripts/gpu-kit.sh [--build DIR] [--check-cpu WORK] OUT_DIR"
[[ ! -e "$out" ]] || die "$out exists: the kit goes into a new folder"
[[ -x "$build/tests/test_exec" && -x "$build/memwall" ]] ||
  die "no test_exec and memwall in $build: build first (make build)"
limit_mib=60

multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
# What the kit copies from this machine, and the package that has it.
declare -A from_package=(
  [/usr/include/nlohmann/json.hpp]=nlohmann-json3-dev
  [/usr/include/CLI/CLI.hpp]=libcli11-dev
  [/usr/include/fmt/format.h]=libfmt-dev
  [/usr/include/liburing.h]=liburing-dev
  [/usr/lib/$multiarch/liburing.a]=liburing-dev
  [/usr/src/googletest/googletest/CMakeLists.txt]=googletest
)
for file in "${!from_package[@]}"; do
  [[ -f "$file" ]] || die "no $file here (apt install ${from_package[$file]})"
done

parent=$(dirname "$out")
mkdir -p "$parent"
tmp=$(mktemp -d "$parent/.gpu-kit.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# The checkout's files as they are now (uncommitted edits included).
(cd "$root" && git ls-files -z -co --exclude-standard |
   while IFS= read -r -d '' f; do [[ -f "$f" ]] && printf '%s\0' "$f"; done |
   tar --null -T - -cf -) | tar -xf - -C "$tmp"

deps="$tmp/deps"
mkdir -p "$deps/include" "$deps/lib" "$deps/licenses"
cp -r /usr/include/nlohmann /usr/include/CLI /usr/include/fmt /usr/include/liburing \
      /usr/include/liburing.h "$deps/include/"
cp "/usr/lib/$multiarch/liburing.a" "$deps/lib/"
cp -r /usr/src/googletest/googletest "$deps/googletest"
for package in nlohmann-json3-dev libcli11-dev libfmt-dev liburing-dev googletest; do
  [[ -f /usr/share/doc/$package/copyright ]] &&
    cp "/usr/share/doc/$package/copyright" "$deps/licenses/$package.copyright"
done

# Plans that need CBC, made by the tests that run them.
mkdir -p "$tmp/inputs/plans"
echo "gpu-kit: making the plans that need CBC (RunExec with MEMWALL_KIT_SAVE_PLANS)"
MEMWALL_KIT_SAVE_PLANS="$tmp/inputs/plans" "$build/tests/test_exec" \
  --gtest_filter='RunExec.CnnWithBatchNormEveryPlannerIsEagerBitForBit' --gtest_brief=1 \
  >"$tmp/inputs/plans.log" 2>&1 || { tail -n 20 "$tmp/inputs/plans.log" >&2; die "the tests that make the plans failed"; }
plans=$(cd "$tmp/inputs/plans" && find . -name '*.plan.json' | sort)
[[ -n "$plans" ]] || die "the tests made no plan (is the executor built? $tmp/inputs/plans.log)"

python=$("$root/scripts/install-deps.sh" --print-python)
torch_version=$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)
commit=$(git -C "$root" rev-parse HEAD)
dirty=$(git -C "$root" status --porcelain --untracked-files=no | wc -l)
python3 - "$tmp" "$commit" "$dirty" "$torch_version" <<'EOF'
import json, sys, time
from pathlib import Path
kit, commit, dirty, torch_version = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
manifest = {
    "format": "memwall.gpu-kit/1",
    "commit": commit + ("+local-edits" if dirty else ""),
    "made": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "plans_made_with_torch": torch_version,
    "plans": sorted(str(p.relative_to(kit)) for p in (kit / "inputs" / "plans").rglob("*.plan.json")),
    "deps": sorted(str(p.relative_to(kit)) for p in (kit / "deps").iterdir()),
}
(kit / "KIT.json").write_text(json.dumps(manifest, indent=1) + "\n")
EOF

size_kib=$(du -sk "$tmp" | cut -f1)
if (( size_kib > limit_mib * 1024 )); then
  die "the kit is $((size_kib / 1024)) MiB, over its ${limit_mib} MiB (du -sh $tmp/* says what grew)"
fi
mv "$tmp" "$out"
trap - EXIT
echo "gpu-kit: $out ($((size_kib / 1024)) MiB): on the GPU machine, cd there and run scripts/gpu-check.sh OUT_DIR"

if [[ -n "$check_dir" ]]; then
  other=$("$root/scripts/install-deps.sh" --other-torch | tail -n1)
  mkdir -p "$check_dir/home"
  # A clean environment: no memwall environment variables, a new HOME (so
  # memwall's own Python environment is not found); only the compiler
  # cache's directory is kept (a cache, not a dependency).
  env -i PATH="$(dirname "$other"):/usr/local/bin:/usr/bin:/bin" HOME="$check_dir/home" \
      LANG=C.UTF-8 CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}" \
      "$out/scripts/gpu-check.sh" --cpu --python "$other" "$check_dir/report"
fi
