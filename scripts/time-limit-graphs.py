#!/usr/bin/env python3
"""Writes the training graphs of docs/planner.md, "Time limits".

Chains of L layers with skip connections, 2L + 2 ops, small enough (at
most 100 ops) for Checkmate's op-level MILP and memwall's exact proposer:

  t49.json, t45.json  L = 49 / 45, every second layer also reading the output
                      two back; t49 is skip_chain(49) of
                      tests/remat/deadline_test.cc
  s37.json            L = 37, every third layer skipping, random sizes and
                      costs (Python's random, seed 2)

Usage: scripts/time-limit-graphs.py DIR
"""
import json
import os
import random
import sys


def chain(name, layers, skip, size_of, flops_of):
    bufs, ops = [], []

    def buf(n, b, kind="activation"):
        bufs.append({"id": len(bufs), "name": n, "bytes": b, "kind": kind})
        return len(bufs) - 1

    def op(n, phase, ins, outs, flops):
        ops.append({"id": len(ops), "name": n, "type": "matmul", "phase": phase,
                    "in": ins, "out": outs, "flops": flops})

    skips = lambda i: i >= 2 and i % skip == 0
    x = buf("x", 1 << 20, "input")
    w = [buf(f"w{i}", 1 << 16, "param") for i in range(layers)]
    y, sizes = [x], []
    for i in range(layers):
        sizes.append(size_of(i))
        out = buf(f"y{i}", sizes[-1])
        op(f"f{i}", "forward", [y[-1], w[i]] + ([y[-2]] if skips(i) else []), [out], flops_of(i))
        y.append(out)
    loss = buf("loss", 4)
    op("loss", "forward", [y[-1]], [loss], 1e8)
    grad = buf("loss.grad", sizes[-1], "temp")
    op("loss.bwd", "backward", [y[-1], loss], [grad], 1e8)
    for i in reversed(range(layers)):
        nxt = buf(f"y{i}.grad_in", sizes[i - 1] if i else 1 << 20, "temp")
        wg = buf(f"w{i}.grad", 1 << 16, "grad")
        ins = [grad, y[i], w[i]] + ([y[i - 1]] if skips(i) else [])
        op(f"f{i}.bwd", "backward", ins, [nxt, wg], 2e9 * (1 + i % 3))
        grad = nxt
    return {"format": "memwall.graph/1", "name": name, "meta": {"model": name},
            "buffers": bufs, "ops": ops}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    fixed_size = lambda i: ((i * 7) % 4 + 1) << 22
    fixed_flops = lambda i: 1e9 * [1, 2, 3, 5][(i * 5) % 4]
    rnd = random.Random(2)
    drawn = {}  # sizes and costs drawn in layer order, as the forward needs them

    def drawn_size(i):
        drawn[i] = (rnd.choice([1, 2, 3, 4]) << 22, None)
        return drawn[i][0]

    def drawn_flops(i):
        drawn[i] = (drawn[i][0], 1e9 * rnd.choice([1, 2, 3, 5]))
        return drawn[i][1]

    graphs = {
        "t49": chain("skip-chain49", 49, 2, fixed_size, fixed_flops),
        "t45": chain("skip-chain45", 45, 2, fixed_size, fixed_flops),
        "s37": chain("chain37s3r2", 37, 3, drawn_size, drawn_flops),
    }
    for name, graph in graphs.items():
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump(graph, f)


if __name__ == "__main__":
    main()
