// Test helper: hand-built training chains for the remat planners.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "memwall/graph/graph.h"
#include "remat_graphs.h"

namespace memwall::testing {

// A chain of `layers` forward ops f0..f{n-1}, y_i = f_i(y_{i-1}) with y_-1
// the input x, then a forward loss reading y_{n-1}; backward runs
// loss.bwd (reads y_{n-1}) and f_i.bwd (reads the gradient and f_i's input)
// from the last layer down. Every y_i is saved for backward and is the only
// thing the forward carries past f_i: n candidate checkpoints. f_i has
// (i + 1) * 1000 flops, so recomputation FLOPs name the ops recomputed.
inline Graph chain_graph(int layers, uint64_t activation_bytes = 100) {
  GraphMaker m(fmt::format("chain{}", layers));
  std::vector<BufferId> y;  // y[0] is x, y[i + 1] is f_i's output
  y.push_back(m.buffer("x", 8, BufferKind::kInput));
  for (int i = 0; i < layers; ++i) {
    const BufferId out = m.buffer(fmt::format("y{}", i), activation_bytes);
    m.op(fmt::format("f{}", i), Phase::kForward, {y.back()}, {out}, 1000.0 * (i + 1));
    y.push_back(out);
  }
  const BufferId loss = m.buffer("loss", 4);
  m.op("loss", Phase::kForward, {y.back()}, {loss}, 10);
  BufferId grad = m.buffer("loss.grad", activation_bytes, BufferKind::kTemp);
  m.op("loss.bwd", Phase::kBackward, {y.back()}, {grad}, 10);
  for (int i = layers - 1; i >= 0; --i) {
    const BufferId next =
        m.buffer(fmt::format("y{}.in_grad", i), activation_bytes, BufferKind::kTemp);
    m.op(fmt::format("f{}.bwd", i), Phase::kBackward, {grad, y[i]}, {next}, 2000.0 * (i + 1));
    grad = next;
  }
  return m.take();
}

}  // namespace memwall::testing
