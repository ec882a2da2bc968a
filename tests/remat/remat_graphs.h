// Test helper for the Rotor and Checkmate tests: small hand-built training
// graphs with heterogeneous sizes and costs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "../graph/graph_builder.h"
#include "memwall/graph/graph.h"

namespace memwall::testing {

// GraphBuilder with a graph name, default activation buffers and op FLOPs.
class GraphMaker {
 public:
  explicit GraphMaker(std::string name) { builder_.graph.name = std::move(name); }
  BufferId buffer(std::string name, uint64_t bytes, BufferKind kind = BufferKind::kActivation) {
    return builder_.buffer(std::move(name), bytes, kind);
  }
  OpId op(std::string name, Phase phase, std::vector<BufferId> in, std::vector<BufferId> out,
          double flops, uint64_t workspace = 0) {
    const OpId id =
        builder_.op(std::move(name), phase, std::move(in), std::move(out), {}, workspace);
    builder_.graph.ops[id].flops = flops;
    return id;
  }
  Graph take() { return std::move(builder_.graph); }

 private:
  GraphBuilder builder_;
};

// y_i = f_i(y_{i-1}) with y_-1 = w (a param, so no input is freed early),
// loss(y_last), then backward: loss.bwd and f_i.bwd reading the gradient
// and f_i's input. sizes[i] is y_i's bytes (its gradient has the same);
// f_i costs (i % 3 + 1) * 1e9 flops and its backward twice that.
inline Graph hetero_chain(const std::vector<uint64_t>& sizes) {
  GraphMaker m(fmt::format("hetero-chain{}", sizes.size()));
  std::vector<BufferId> y{m.buffer("w", 8, BufferKind::kParam)};
  for (size_t i = 0; i < sizes.size(); ++i) {
    const BufferId out = m.buffer(fmt::format("y{}", i), sizes[i]);
    m.op(fmt::format("f{}", i), Phase::kForward, {y.back()}, {out}, 1e9 * double(i % 3 + 1));
    y.push_back(out);
  }
  const BufferId loss = m.buffer("loss", 4);
  m.op("loss", Phase::kForward, {y.back()}, {loss}, 1e8);
  BufferId grad = m.buffer("loss.grad", sizes.back(), BufferKind::kTemp);
  m.op("loss.bwd", Phase::kBackward, {y.back(), loss}, {grad}, 1e8);
  for (size_t i = sizes.size(); i-- > 0;) {
    const uint64_t in_bytes = i == 0 ? 8 : sizes[i - 1];
    const BufferId next = m.buffer(fmt::format("y{}.grad_in", i), in_bytes, BufferKind::kTemp);
    m.op(fmt::format("f{}.bwd", i), Phase::kBackward, {grad, y[i]}, {next},
         2e9 * double(i % 3 + 1));
    grad = next;
  }
  return m.take();
}

}  // namespace memwall::testing
