#!/usr/bin/env bash
# Runs every libFuzzer target in BUILD/fuzz for SECONDS each, JOBS at a time
# (each fuzzer is one process on one core, so each still gets SECONDS of a
# core), starting from the seed corpus fuzz/corpus/<name without fuzz_
# prefix and _reader suffix>. Generated inputs go to a temporary directory
# so the repository stays clean. A failing target's log tail is printed
# and the script exits 1 once the others are done.
#
#   scripts/run-fuzzers.sh BUILD [SECONDS] [JOBS]
set -euo pipefail
build=$(cd "${1:?build dir}" && pwd)
seconds=${2:-15}
jobs=${3:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One target: its corpus, its run, its result in $work/<name>.status.
fuzz_one() {
  local fuzzer=$1 name seeds
  name=$(basename "$fuzzer")
  seeds="$root/fuzz/corpus/${name#fuzz_}"
  seeds="${seeds%_reader}"
  mkdir -p "$work/$name"
  [[ -d "$seeds" ]] && cp -r "$seeds"/. "$work/$name/"
  if (cd "$work" && "$fuzzer" -max_total_time="$seconds" -print_final_stats=0 \
        "$work/$name" >"$work/$name.log" 2>&1); then
    echo ok >"$work/$name.status"
  else
    echo failed >"$work/$name.status"
  fi
}

names=()
for fuzzer in "$build"/fuzz/fuzz_*; do
  [[ -x "$fuzzer" ]] || continue
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
  echo "fuzz: $(basename "$fuzzer") for ${seconds}s"
  fuzz_one "$fuzzer" &
  names+=("$(basename "$fuzzer")")
done
wait
failed=0
for name in "${names[@]}"; do
  if [[ "$(cat "$work/$name.status" 2>/dev/null)" != ok ]]; then
    echo "fuzz: $name failed:"
    tail -50 "$work/$name.log"
    failed=1
  else
    grep -E "^Done|#[0-9]+.*DONE" "$work/$name.log" | tail -1 | sed "s/^/$name: /" || true
  fi
done
exit $failed
