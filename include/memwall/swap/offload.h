// Model states off the device: ZeRO-Offload (Ren et al. 2021: gradients to
// the host, optimizer states and the Adam step on the CPU, overlapped with
// backward) and ZeRO-Infinity (Rajbhandari et al. 2021: parameters and
// optimizer states on NVMe, prefetched ahead of use). See
// docs/swap-offload.md.
//
// Offloading is two steps. offload_graph rewrites each optimizer step into a
// CPU step and a device copy of its result; apply_offload then takes any
// plan of that graph (the default one, or an activation planner's) and adds
// the model-state traffic. planning_view is the graph activation planners
// should plan against: the states that no longer live on the device weigh
// nothing there.
#pragma once

#include <cstdint>
#include <vector>

#include "memwall/graph/types.h"
#include "memwall/plan/plan.h"

namespace memwall {

struct OffloadOptions {
  Tier optimizer = Tier::kDevice;  // host: ZeRO-Offload; nvme: ZeRO-Infinity
  Tier params = Tier::kDevice;     // host or nvme: ZeRO-Infinity's parameter offload
  // Offloaded parameters are brought in this many compute steps ahead of
  // their first user, and again for users further apart than regather_gap.
  int prefetch_steps = 2;
  int regather_gap = 32;

  bool any() const { return optimizer != Tier::kDevice || params != Tier::kDevice; }
};

// One parameter's states after offload_graph.
struct OffloadedState {
  BufferId param = -1;
  BufferId grad = -1;  // what the CPU step reads
  std::vector<BufferId> states;
  // Parameters on the device: the CPU step writes `update` (the new 16-bit
  // or fp32 values) and `apply` copies it into param. Parameters offloaded:
  // the CPU step updates param itself; both are -1.
  BufferId update = -1;
  OpId step = kNoOp;  // the CPU step: reads grad, updates states
  OpId apply = kNoOp;
};

struct OffloadGraph {
  Graph graph;
  std::vector<OffloadedState> states;  // in step order
};

// Rewrites every per-parameter optimizer step (model_states in
// optimizer_steps.h; a step of several ops is fused into one first) for a
// CPU optimizer (Note [Offloaded optimizer step] in offload.cc). A
// parameter without an fp32 master copy among its states (fp32 training)
// gets one: the CPU keeps the values it steps. `options` says whether the
// parameters stay on the device (the rewrite differs); throws Error for
// options apply_offload would refuse.
OffloadGraph offload_graph(const Graph& graph, const OffloadOptions& options);

// `plan` (of og.graph) with the model-state moves of `options` (Note
// [Offload steps]). The plan's own steps keep their order; its budget and
// names are kept. Throws Error for options that name a tier a state cannot
// live on, or a plan that never computes a step or apply op.
Plan apply_offload(const OffloadGraph& og, const Plan& plan, const OffloadOptions& options);

// og.graph with the device weight of what `options` moves off the device
// set to 0 bytes: optimizer states and gradients (which leave right after
// they are made) when the optimizer is offloaded, the CPU step's output and
// workspace, and offloaded parameters (brought in per use). Op and buffer
// ids are kept.
Graph planning_view(const OffloadGraph& og, const OffloadOptions& options);

}  // namespace memwall
