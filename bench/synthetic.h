// A synthetic training iteration for benchmarks, shaped like a deep chain:
// forward op i reads activation i-1 and a parameter and creates activation
// i; backward ops walk the chain in reverse, reading the saved activation and
// creating its gradient while accumulating parameter gradients in place; one
// optimizer op per parameter reads its gradient and updates it and its
// optimizer state.
#pragma once

#include <fmt/format.h>

#include "memwall/graph/graph.h"

namespace memwall::bench {

constexpr int kParams = 16;

inline BufferId add_buffer(Graph& graph, std::string name, uint64_t bytes, BufferKind kind) {
  Buffer& b = graph.buffers.emplace_back();
  b.id = static_cast<BufferId>(graph.buffers.size() - 1);
  b.name = std::move(name);
  b.bytes = bytes;
  b.kind = kind;
  b.dtype = DType::kBF16;
  b.shape = {static_cast<int64_t>(bytes / 2)};
  return b.id;
}

inline Op& add_op(Graph& graph, std::string name, std::string type, Phase phase) {
  Op& op = graph.ops.emplace_back();
  op.id = static_cast<OpId>(graph.ops.size() - 1);
  op.name = std::move(name);
  op.type = std::move(type);
  op.phase = phase;
  op.flops = 1.5e9;
  op.bytes = 4.2e6;
  return op;
}

// About `ops` ops and as many buffers.
inline Graph synthetic_graph(int ops = 1'000'000) {
  Graph graph;
  graph.name = fmt::format("synthetic chain {} ops", ops);
  graph.meta = {{"generator", "memwall bench"}, {"ops", ops}};
  const int forward = (ops - kParams) / 2;
  std::vector<BufferId> params, states, param_grads(kParams, -1), acts, grads(forward, -1);
  for (int p = 0; p < kParams; ++p) {
    params.push_back(add_buffer(graph, fmt::format("p{}", p), 1 << 20, BufferKind::kParam));
    states.push_back(add_buffer(graph, fmt::format("p{}.m", p), 2 << 20, BufferKind::kOptimState));
  }
  const BufferId input = add_buffer(graph, "x", 1 << 16, BufferKind::kInput);
  for (int i = 0; i < forward; ++i) {
    const BufferId a =
        add_buffer(graph, fmt::format("l{}.out", i), 1 << 16, BufferKind::kActivation);
    Op& op = add_op(graph, fmt::format("l{}.fwd", i), "matmul", Phase::kForward);
    op.in = {i == 0 ? input : acts.back(), params[i % kParams]};
    op.out = {a};
    acts.push_back(a);
  }
  for (int i = forward - 1; i >= 0; --i) {
    const BufferId g = add_buffer(graph, fmt::format("l{}.grad", i), 1 << 16, BufferKind::kGrad);
    Op& op = add_op(graph, fmt::format("l{}.bwd", i), "matmul_grad", Phase::kBackward);
    op.in = {acts[i], params[i % kParams]};
    if (i + 1 < forward) op.in.push_back(grads[i + 1]);
    op.out = {g};
    grads[i] = g;
    BufferId& pg = param_grads[i % kParams];
    if (pg < 0) {
      pg = add_buffer(graph, fmt::format("p{}.grad", i % kParams), 1 << 20, BufferKind::kGrad);
      op.out.push_back(pg);
    } else {
      op.updates = {pg};  // gradient accumulation
    }
    op.workspace = 1 << 12;
  }
  for (int p = 0; p < kParams; ++p) {
    Op& op = add_op(graph, fmt::format("p{}.adam", p), "adam", Phase::kOptimizer);
    op.in = {param_grads[p]};
    op.updates = {params[p], states[p]};
  }
  return graph;
}

}  // namespace memwall::bench
