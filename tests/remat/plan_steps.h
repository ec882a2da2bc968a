// Test helper: what a remat plan evicted and recomputed, by name, in plan
// order (the DTR and lookahead tests compare these with hand-derived
// lists), and the check both apply to every plan they get.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/plan/plan.h"
#include "memwall/remat/checkpoints.h"
#include "memwall/sim/simulator.h"

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

// Checks a remat plan: the simulator accepts it within `budget`, and every
// buffer it evicts is a droppable activation. True when it fits.
inline bool plan_fits_evicting_only_droppable(const Graph& graph, const Hardware& hardware,
                                              uint64_t budget, const Plan& plan) {
  const SimResult sim = simulate(graph, plan, hardware, {.record_curves = false});
  const uint64_t peak = sim.peak_bytes[static_cast<int>(Tier::kDevice)];
  EXPECT_TRUE(sim.valid) << sim.reason;
  EXPECT_LE(peak, budget);
  const std::vector<uint8_t> droppable = droppable_activations(graph);
  for (const std::string& buffer : evicted(graph, plan)) {
    const auto it = std::find_if(graph.buffers.begin(), graph.buffers.end(),
                                 [&](const Buffer& b) { return b.name == buffer; });
    EXPECT_TRUE(it != graph.buffers.end() && droppable[it->id]) << buffer;
  }
  return sim.valid && peak <= budget;
}

}  // namespace memwall::testing
