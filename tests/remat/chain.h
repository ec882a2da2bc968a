// Test helper: hand-built training chains for the remat planners.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "memwall/graph/graph.h"

namespace memwall::testing {

// A chain of `layers` forward ops f0..f{n-1}, y_i = f_i(y_{i-1}) with y_-1
// the input x, then a forward loss reading y_{n-1}; backward runs
// loss.bwd (reads y_{n-1}) and f_i.bwd (reads the gradient and f_i's input)
// from the last layer down. Every y_i is saved for backward and is the only
// thing the forward carries past f_i: n candidate checkpoints. f_i has
// (i + 1) * 1000 flops, so recomputation FLOPs name the ops recomputed.
inline Graph chain_graph(int layers, uint64_t activation_bytes = 100) {
  Graph graph;
  graph.name = fmt::format("chain{}", layers);
  const auto buffer = [&](std::string name, uint64_t bytes, BufferKind kind) {
    Buffer b;
    b.id = static_cast<BufferId>(graph.buffers.size());
    b.name = std::move(name);
    b.bytes = bytes;
    b.kind = kind;
    graph.buffers.push_back(std::move(b));
    return b.id;
  };
  const auto op = [&](std::string name, Phase phase, std::vector<BufferId> in,
                      std::vector<BufferId> out, double flops) {
    Op o;
    o.id = static_cast<OpId>(graph.ops.size());
    o.name = std::move(name);
    o.type = "test";
    o.phase = phase;
    o.in = std::move(in);
    o.out = std::move(out);
    o.flops = flops;
    graph.ops.push_back(std::move(o));
  };
  std::vector<BufferId> y;  // y[0] is x, y[i + 1] is f_i's output
  y.push_back(buffer("x", 8, BufferKind::kInput));
  for (int i = 0; i < layers; ++i) {
    const BufferId out = buffer(fmt::format("y{}", i), activation_bytes, BufferKind::kActivation);
    op(fmt::format("f{}", i), Phase::kForward, {y.back()}, {out}, 1000.0 * (i + 1));
    y.push_back(out);
  }
  const BufferId loss = buffer("loss", 4, BufferKind::kActivation);
  op("loss", Phase::kForward, {y.back()}, {loss}, 10);
  BufferId grad = buffer("loss.grad", activation_bytes, BufferKind::kTemp);
  op("loss.bwd", Phase::kBackward, {y.back()}, {grad}, 10);
  for (int i = layers - 1; i >= 0; --i) {
    const BufferId next =
        buffer(fmt::format("y{}.in_grad", i), activation_bytes, BufferKind::kTemp);
    op(fmt::format("f{}.bwd", i), Phase::kBackward, {grad, y[i]}, {next}, 2000.0 * (i + 1));
    grad = next;
  }
  return graph;
}

}  // namespace memwall::testing
