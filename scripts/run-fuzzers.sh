#!/usr/bin/env bash
# Runs every libFuzzer target in BUILD/fuzz for SECONDS each, starting from
# the seed corpus fuzz/corpus/<name without fuzz_ prefix and _reader suffix>.
# Generated inputs go to a temporary directory so the repository stays clean.
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd)
seconds=${2:-15}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for fuzzer in "$build"/fuzz/fuzz_*; do
  [[ -x "$fuzzer" ]] || continue
  name=$(basename "$fuzzer")
  seeds="$root/fuzz/corpus/${name#fuzz_}"
  seeds="${seeds%_reader}"
  mkdir -p "$work/$name"
  [[ -d "$seeds" ]] && cp -r "$seeds"/. "$work/$name/"
  echo "fuzz: $name for ${seconds}s"
  (cd "$work" && "$fuzzer" -max_total_time="$seconds" -print_final_stats=0 "$work/$name" \
     >"$work/$name.log" 2>&1) || { tail -50 "$work/$name.log"; exit 1; }
  grep -E "^Done|#[0-9]+.*DONE" "$work/$name.log" | tail -1 || true
done
