// Test helper: what a remat plan evicted and recomputed, by name, in plan
// order (the DTR and lookahead tests compare these with hand-derived lists).
#pragma once

#include <string>
#include <vector>

#include "memwall/graph/graph.h"
#include "memwall/plan/plan.h"

namespace memwall::testing {

// Buffers freed before their last use (evicted), in plan order.
inline std::vector<std::string> evicted(const Graph& graph, const Plan& plan) {
  const std::vector<BufferLife> lives = liveness(graph);
  std::vector<uint8_t> computed(graph.ops.size(), 0);
  std::vector<std::string> names;
  for (const Step& step : plan.steps) {
    if (step.kind == StepKind::kCompute) computed[step.op] = 1;
    const OpId last = step.kind == StepKind::kFree ? lives[step.buf].last_use : kNoOp;
    if (last != kNoOp && !computed[last]) names.push_back(graph.buffers[step.buf].name);
  }
  return names;
}

// Ops recomputed, in plan order.
inline std::vector<std::string> recomputed(const Graph& graph, const Plan& plan) {
  std::vector<std::string> names;
  for (const Step& step : plan.steps) {
    if (step.kind == StepKind::kRecompute) names.push_back(graph.ops[step.op].name);
  }
  return names;
}

}  // namespace memwall::testing
