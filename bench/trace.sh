#!/usr/bin/env bash
# Times `memwall trace` on the meta device (issue 8's targets, measured here
# rather than in timed unit tests):
#   ResNet-50 at batch 32 (image 224, Adam)        target < 5 s
#   a Llama-2-7B-shaped decoder, batch 1, seq 4096  target < 30 s
# Each is run REPEAT times (default 3). Printed: the best and the median wall
# time, end to end (Python's start-up and torch's import included), and the
# CPU time (user + system, memwall and the tracer) of the best run, which a
# loaded machine inflates less than the wall time.
#   bench/trace.sh [path/to/memwall] [REPEAT]
set -euo pipefail
cd "$(dirname "$0")/.."
memwall=${1:-build/memwall}
repeat=${2:-3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
TIMEFORMAT='%R %U %S'

run() {  # label target-seconds args...
  local label=$1 target=$2
  shift 2
  : >"$out/times"
  for ((i = 0; i < repeat; i++)); do
    { time "$memwall" trace "$@" --out "$out/g.json" >/dev/null; } 2>>"$out/times"
  done
  sort -g "$out/times" | awk -v label="$label" -v target="$target" '
    { wall[NR] = $1; cpu[NR] = $2 + $3 }
    END {
      printf "%-46s best %6.2f s  median %6.2f s  cpu %6.2f s  (target < %s s)\n",
             label, wall[1], wall[int((NR + 1) / 2)], cpu[1], target
    }'
}

run "resnet50 b32 i224 (torchvision, meta)" 5 --torchvision resnet50 --batch 32
run "llama2-7b-shaped b1 s4096 (plain torch, meta)" 30 --script tests/python/llama7b.py:build
