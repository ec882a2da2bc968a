// Helpers shared by the remat tests.
#pragma once

#include <cstdint>
#include <vector>

#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/plan/builders.h"
#include "memwall/plan/plan.h"

namespace memwall {

// The GPU the remat tests plan for.
inline const Hardware& gpu() { return find_gpu("a100-80g"); }

// Saved-for-backward buffers the plan drops: those whose producer it recomputes.
inline std::vector<uint8_t> dropped_saved(const Graph& graph, const Plan& plan) {
  const std::vector<uint8_t> saved = saved_for_backward(graph);
  std::vector<uint8_t> recomputed(graph.ops.size(), 0);
  for (const Step& step : plan.steps) {
    if (step.kind == StepKind::kRecompute) recomputed[step.op] = 1;
  }
  const BufferUses uses(graph);
  std::vector<uint8_t> dropped(graph.buffers.size(), 0);
  for (const Buffer& b : graph.buffers) {
    const OpId producer = uses.producer(b.id);
    dropped[b.id] = saved[b.id] && producer != kNoOp && recomputed[producer];
  }
  return dropped;
}

}  // namespace memwall
