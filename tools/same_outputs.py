#!/usr/bin/env python3
"""Checks that two memwall binaries print the same for a fixed list of
commands: the refactor check of issue 46 ("behaviour unchanged").

Usage:
  tools/same_outputs.py OLD_MEMWALL NEW_MEMWALL   # run both, compare, exit 1 on a difference
  tools/same_outputs.py --record DIR MEMWALL      # write each command's output to DIR

The commands: `make demo`'s two plans with --json, `inspect --json` on three
zoo models, `layout` of three MiniMalloc inputs (../shared/data/layout; the
rows are left out with a note when it is absent), `bench remat --json` on
one model, and `run --builtin gpt-mini --check-eager --json` on a built-in
profile. The planners search until a wall-clock limit, so the commands give
them one they do not reach (600 s); what they print is then the end of the
search on any machine. What a run measures on the clock (step, kernel, wait and overhead
times, the measured share of copies hidden behind compute, the prediction
made from the run's own kernel times, a layout solver's seconds) differs
between any two runs of one binary and is left out; every byte count, loss
and predicted time is compared. Each command runs from a scratch directory
so that files it writes do not land in the checkout.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYOUT_DATA = os.path.join(os.path.dirname(ROOT), "shared", "data", "layout")

# (name, arguments). Names are file names under --record.
COMMANDS: list[tuple[str, list[str]]] = [
    ("demo-llama2-7b", ["plan", "--model", "llama2-7b", "--gpu", "rtx4090", "--batch", "4",
                        "--seq", "2048", "--optimizer", "adamw", "--time-limit", "600", "--json"]),
    ("demo-llama3-8b-qlora", ["plan", "--model", "llama3-8b", "--qlora", "--gpu", "t4",
                              "--batch", "1", "--seq", "2048", "--optimizer", "adamw", "--time-limit", "600", "--json"]),
    ("inspect-gpt2-small", ["inspect", "--model", "gpt2-small", "--json"]),
    ("inspect-resnet50", ["inspect", "--model", "resnet50", "--json"]),
    ("inspect-mixtral-8x7b", ["inspect", "--model", "mixtral-8x7b", "--json"]),
    ("bench-remat-gpt2-small", ["bench", "remat", "--model", "gpt2-small", "--batch", "1", "--seq",
                                "64", "--time-limit", "600", "--json"]),
    ("run-gpt-mini", ["run", "--builtin", "gpt-mini", "--check-eager", "--gpu", "a100-80g",
                      "--json"]),
]
# Heuristic layouts: the default and exact solvers stop on a CPU-time limit,
# so what they print can depend on the machine's load.
LAYOUTS = [("minimalloc-A.1048576.csv", "greedy-by-size"),
           ("minimalloc-B.1048576.csv", "greedy-by-breadth"),
           ("minimalloc-C.1048576.csv", "best-fit")]

# Keys whose values come from the clock.
CLOCK_KEYS = {"kernel_time_s", "overhead_s", "wait_time_s", "predicted_with_run_kernels",
              "seconds", "solve_seconds", "time_s", "wall_s"}
# Keys holding {"measured": clock, "predicted": model}: only the prediction is compared.
MEASURED_ON_THE_CLOCK = {"step_time_s", "transfer_overlap"}


def commands() -> list[tuple[str, list[str]]]:
    rows = list(COMMANDS)
    for csv, algo in LAYOUTS:
        path = os.path.join(LAYOUT_DATA, csv)
        if os.path.exists(path):
            rows.append((f"layout-{csv[:-4]}-{algo}",
                         ["layout", "--csv", path, "--algo", algo, "--json"]))
    return rows


def without_clock(value: Any) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in CLOCK_KEYS:
                continue
            if key in MEASURED_ON_THE_CLOCK and isinstance(item, dict):
                item = {k: v for k, v in item.items() if k != "measured"}
            out[key] = without_clock(item)
        return out
    if isinstance(value, list):
        return [without_clock(item) for item in value]
    return value


def run(memwall: str, args: list[str]) -> str:
    with tempfile.TemporaryDirectory(prefix="memwall-same-") as scratch:
        done = subprocess.run([os.path.abspath(memwall), *args], cwd=scratch, text=True,
                              capture_output=True, timeout=900)
    text = done.stdout
    try:
        text = json.dumps(without_clock(json.loads(text)), indent=1, sort_keys=True)
    except json.JSONDecodeError:
        pass  # not JSON (an error): compared as printed
    return f"exit {done.returncode}\n{text}\nstderr:\n{done.stderr}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", metavar="DIR", help="write the outputs of one binary to DIR")
    parser.add_argument("binaries", nargs="+", metavar="MEMWALL")
    args = parser.parse_args()
    if args.record:
        if len(args.binaries) != 1:
            parser.error("--record takes one binary")
        os.makedirs(args.record, exist_ok=True)
        for name, argv in commands():
            with open(os.path.join(args.record, name + ".txt"), "w") as out:
                out.write(run(args.binaries[0], argv))
        return 0
    if len(args.binaries) != 2:
        parser.error("give OLD_MEMWALL NEW_MEMWALL")
    old, new = args.binaries
    if not os.path.isdir(LAYOUT_DATA):
        print(f"note: {LAYOUT_DATA} is absent: the layout rows are left out")
    differ = 0
    for name, argv in commands():
        before, after = run(old, argv), run(new, argv)
        same = before == after
        differ += not same
        print(f"{'same   ' if same else 'DIFFERS'} {name}: memwall {' '.join(argv)}")
        if not same:
            for i, (a, b) in enumerate(zip(before.splitlines(), after.splitlines())):
                if a != b:
                    print(f"  first difference, line {i + 1}:\n  - {a}\n  + {b}")
                    break
            else:
                print("  one output is a prefix of the other")
    print(f"{len(commands()) - differ} of {len(commands())} commands print the same")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
