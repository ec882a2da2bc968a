#!/usr/bin/env python3
"""Each op's kernel scratch as `memwall run` measured it, beside the graph's.

Reads the memory log of a run (MEMWALL_EXEC_MEMORY_LOG=FILE memwall run ...,
src/exec/executor.cc): per plan step of the first iteration, the device
allocations ("+ ADDRESS BYTES") and frees ("- ADDRESS") it made, then a line
"STEP LIVE PEAK". For each compute step, the allocations still live at its
end are the op's outputs and the ones it freed are its scratch; the
workspace and span follow the definitions of python/memwall/tracer/scratch.py's
replay(): the highest scratch + outputs so far less all the outputs, and the
highest scratch. Prints one row per op whose measured or modelled scratch is
not zero (or per op named with --ops): measured workspace / span, then the
graph's. docs/cost-model.md, "Kernel scratch", says how the rules were found.

usage: measure-scratch.py GRAPH.json PLAN.json MEMORY.log [--ops a,b,...] [--json]
"""
import argparse
import json
import sys


def steps_of(log_path):
    """(step index, [events]) per summary line, events as in the log."""
    events = []
    with open(log_path) as f:
        for number, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "+" and len(parts) == 3:
                events.append(("+", parts[1], int(parts[2])))
            elif parts[0] == "-" and len(parts) == 2:
                events.append(("-", parts[1]))
            elif len(parts) == 3 and parts[0].isdigit():
                yield int(parts[0]), events
                events = []
            else:
                sys.exit(f"measure-scratch: {log_path}:{number}: not a memory log line: {line.strip()!r}")


def scratch_of(events):
    """(workspace, span) of one step's allocations, replay()'s definitions."""
    # An address freed in the step can be given out again in it: number the
    # allocations, and free the latest at an address.
    allocations = []  # (bytes, freed in this step)
    latest = {}
    for e in events:
        if e[0] == "+":
            latest[e[1]] = len(allocations)
            allocations.append([e[2], False])
        elif e[1] in latest:
            allocations[latest.pop(e[1])][1] = True
    outputs = sum(bytes for bytes, freed in allocations if not freed)
    scratch = made = workspace = span = 0
    n = 0
    latest = {}
    for e in events:
        if e[0] == "+":
            bytes, freed = allocations[n]
            latest[e[1]] = n
            n += 1
            if freed:
                scratch += bytes
            else:
                made += bytes
        elif e[1] in latest:  # not a free of an input or an older buffer
            scratch -= allocations[latest.pop(e[1])][0]
        span = max(span, scratch)
        workspace = max(workspace, scratch + made - outputs)
    return max(workspace, 0), span


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("graph")
    parser.add_argument("plan")
    parser.add_argument("log")
    parser.add_argument("--ops", help="comma-separated op names (default: every op with scratch)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with open(args.graph) as f:
        graph = json.load(f)
    with open(args.plan) as f:
        plan = json.load(f)
    ops = {o["id"]: o for o in graph["ops"]}
    wanted = set(args.ops.split(",")) if args.ops else None
    rows = []
    for index, events in steps_of(args.log):
        if index >= len(plan["steps"]):
            sys.exit(f"measure-scratch: {args.log}: step {index} is not in {args.plan}")
        step = plan["steps"][index]
        if step["do"] not in ("compute", "recompute"):
            continue
        op = ops[step["op"]]
        workspace, span = scratch_of(events)
        rule = op.get("workspace", 0)
        rule_span = op.get("workspace_span", rule)
        if wanted is not None and op["name"] not in wanted:
            continue
        if wanted is None and workspace == span == rule == rule_span == 0:
            continue
        rows.append({"op": op["name"], "step": index, "workspace": workspace, "span": span,
                     "rule_workspace": rule, "rule_span": rule_span})
    if wanted is not None:
        missing = wanted - {r["op"] for r in rows}
        if missing:
            sys.exit(f"measure-scratch: no compute step of {', '.join(sorted(missing))} in the log")
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
        return
    print(f"{'op':44} {'measured workspace / span':>28} {'rule workspace / span':>28}")
    for r in rows:
        print(f"{r['op']:44} {r['workspace']:>13,} / {r['span']:>12,} "
              f"{r['rule_workspace']:>13,} / {r['rule_span']:>12,}")


if __name__ == "__main__":
    main()
