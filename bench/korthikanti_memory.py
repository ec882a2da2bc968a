#!/usr/bin/env python3
"""Korthikanti et al. 2022's evaluation models (Table 3: 22B, 175B, 530B and
1T GPTs, t = 8, sequence 2048, micro-batch 1) and the activation memory a
layer saves under each technique, from memwall's own graphs: one layer's
bytes is the difference between the saved bytes of 3 and 2 layers in a
one-device pipeline plan (`memwall plan --pipeline-parallel 1 --json`).
Prints a markdown table (docs/pipeline.md, "Korthikanti et al.'s models").

    bench/korthikanti_memory.py [MEMWALL_BINARY]
"""
import json
import subprocess
import sys

MODELS = [("22B", 6144, 64), ("175B", 12288, 96), ("530B", 20480, 128), ("1T", 25600, 160)]
TECHNIQUES = [
    ("tensor parallel", [], "keep-all"),
    ("+ sequence parallel", ["--sequence-parallel"], "keep-all"),
    ("+ selective", [], "selective"),
    ("+ sequence parallel + selective", ["--sequence-parallel"], "selective"),
    ("+ sequence parallel + full recompute", ["--sequence-parallel"], "per-layer"),
]


def saved(binary: str, layers: int, hidden: int, heads: int, extra: list, checkpointing: str) -> int:
    shape = f"layers={layers},hidden={hidden},heads={heads},vocab=51200,positions=2048"
    out = subprocess.run([binary, "plan", "--model", "gpt2-small", "--shape", shape, "--seq", "2048",
                          "--batch", "1", "--tensor-parallel", "8", *extra, "--pipeline-parallel",
                          "1", "--checkpointing", checkpointing, "--json"],
                         check=True, capture_output=True, text=True).stdout
    return int(json.loads(out)["chunks"][0]["saved_bytes"])


def main() -> int:
    binary = sys.argv[1] if len(sys.argv) > 1 else "build/memwall"
    print("| model (h, a) | " + " | ".join(name for name, _, _ in TECHNIQUES) + " |")
    print("|---|" + "---|" * len(TECHNIQUES))
    for name, hidden, heads in MODELS:
        cells = []
        base = 0
        for _, extra, checkpointing in TECHNIQUES:
            layer = (saved(binary, 3, hidden, heads, extra, checkpointing) -
                     saved(binary, 2, hidden, heads, extra, checkpointing))
            base = base or layer
            cells.append(f"{layer / 2**20:,.1f} MiB ({100 * layer / base:.1f}%)")
        print(f"| {name} ({hidden}, {heads}) | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
