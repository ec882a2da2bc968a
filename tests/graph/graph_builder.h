// Test helper: builds small graphs in memory, one call per buffer or op.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "memwall/graph/graph.h"

namespace memwall::testing {

class GraphBuilder {
 public:
  BufferId buffer(std::string name, uint64_t bytes, BufferKind kind) {
    Buffer b;
    b.id = static_cast<BufferId>(graph.buffers.size());
    b.name = std::move(name);
    b.bytes = bytes;
    b.kind = kind;
    graph.buffers.push_back(std::move(b));
    return graph.buffers.back().id;
  }

  OpId op(std::string name, Phase phase, std::vector<BufferId> in, std::vector<BufferId> out,
          std::vector<BufferId> updates = {}, uint64_t workspace = 0) {
    Op o;
    o.id = static_cast<OpId>(graph.ops.size());
    o.name = std::move(name);
    o.type = "test";
    o.phase = phase;
    o.in = std::move(in);
    o.out = std::move(out);
    o.updates = std::move(updates);
    o.workspace = workspace;
    graph.ops.push_back(std::move(o));
    return graph.ops.back().id;
  }

  Graph graph;
};

// A two-layer training step with known figures (memory_test.cc derives them).
//   buffers: 0 w param 100, 1 x input 10, 2 a1 activation 20, 3 a2 activation 40,
//            4 w.grad grad 100, 5 a1.grad grad 30, 6 w.m optim_state 200
//   op 0 fc1      forward   in [x, w]        out [a1]      workspace 5
//   op 1 fc2      forward   in [a1, w]       out [a2]
//   op 2 fc2.bwd  backward  in [a2]          out [a1.grad]
//   op 3 fc1.bwd  backward  in [a1.grad, a1, x] out [w.grad] workspace 7
//   op 4 adam     optimizer in [w.grad]      updates [w, w.m]
inline Graph two_layer_step() {
  GraphBuilder g;
  const BufferId w = g.buffer("w", 100, BufferKind::kParam);
  const BufferId x = g.buffer("x", 10, BufferKind::kInput);
  const BufferId a1 = g.buffer("a1", 20, BufferKind::kActivation);
  const BufferId a2 = g.buffer("a2", 40, BufferKind::kActivation);
  const BufferId w_grad = g.buffer("w.grad", 100, BufferKind::kGrad);
  const BufferId a1_grad = g.buffer("a1.grad", 30, BufferKind::kGrad);
  const BufferId w_m = g.buffer("w.m", 200, BufferKind::kOptimState);
  g.op("fc1", Phase::kForward, {x, w}, {a1}, {}, 5);
  g.op("fc2", Phase::kForward, {a1, w}, {a2});
  g.op("fc2.bwd", Phase::kBackward, {a2}, {a1_grad});
  g.op("fc1.bwd", Phase::kBackward, {a1_grad, a1, x}, {w_grad}, {}, 7);
  g.op("adam", Phase::kOptimizer, {w_grad}, {}, {w, w_m});
  return g.graph;
}

// The message graph_from_json_text throws for `text`, or "no error".
inline std::string json_error_of(const std::string& text) {
  try {
    graph_from_json_text(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace memwall::testing
