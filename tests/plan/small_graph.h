// Test helper: a small valid training step to check plans against.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "memwall/graph/graph.h"

namespace memwall::testing {

// buffers: 0 "w" param 64, 1 "x" input 16, 2 "w.m" optim_state 128,
//          3 "w.grad" grad 64, 4 "y" activation 32, 5 "h0.out" activation 64
// ops:     0 "fc" in [x, w] out [h0.out]; 1 "act" in [h0.out] out [y];
//          2 "fc.bwd" in [y, x] out [w.grad]; 3 "adam" in [w.grad] updates [w, w.m]
inline Graph small_graph() {
  Graph graph;
  graph.name = "small";
  const auto buffer = [&](std::string name, uint64_t bytes, BufferKind kind) {
    Buffer b;
    b.id = static_cast<BufferId>(graph.buffers.size());
    b.name = std::move(name);
    b.bytes = bytes;
    b.kind = kind;
    graph.buffers.push_back(std::move(b));
  };
  const auto op = [&](std::string name, Phase phase, std::vector<BufferId> in,
                      std::vector<BufferId> out, std::vector<BufferId> updates = {}) {
    Op o;
    o.id = static_cast<OpId>(graph.ops.size());
    o.name = std::move(name);
    o.type = "test";
    o.phase = phase;
    o.in = std::move(in);
    o.out = std::move(out);
    o.updates = std::move(updates);
    graph.ops.push_back(std::move(o));
  };
  buffer("w", 64, BufferKind::kParam);
  buffer("x", 16, BufferKind::kInput);
  buffer("w.m", 128, BufferKind::kOptimState);
  buffer("w.grad", 64, BufferKind::kGrad);
  buffer("y", 32, BufferKind::kActivation);
  buffer("h0.out", 64, BufferKind::kActivation);
  op("fc", Phase::kForward, {1, 0}, {5});
  op("act", Phase::kForward, {5}, {4});
  op("fc.bwd", Phase::kBackward, {4, 1}, {3});
  op("adam", Phase::kOptimizer, {3}, {}, {0, 2});
  return graph;
}

}  // namespace memwall::testing
