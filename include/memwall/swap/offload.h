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
  // Per parameter (in model_states order), the tier of its optimizer states
  // when they are split (Note [Optimizer chunks]); empty: every state on
  // `optimizer`, which must be off the device for a split. An entry kDevice
  // keeps that parameter whole on the device: parameter, gradient, states
  // and step, the step run as soon as its gradient is complete (Note
  // [Device chunks] in offload.cc), whatever `params` says.
  std::vector<Tier> optimizer_of;
  // Offloaded parameters are brought in this many compute steps ahead of
  // their first user, and again for users further apart than regather_gap.
  int prefetch_steps = 2;
  int regather_gap = 32;
  // NVMe-resident states are read into host memory this many CPU steps
  // before their own (1: with the step before theirs), so the NVMe reads
  // run ahead of the CPU instead of in lockstep with it.
  int nvme_read_ahead = 1;
  // bitsandbytes' paged optimizers (Dettmers et al. 2023, sec. 3): the
  // states live on the host (`optimizer` must be kHost, `params` kDevice,
  // no split) and the device runs the step where the plan has it, after
  // backward, paging each parameter's states in for its step and out after
  // (Note [Paged optimizer] in offload.cc).
  bool paged = false;
  // The CPU steps wait for the end of backward, as DeepSpeed runs
  // ZeRO-Offload and ZeRO-Infinity (Note [Steps after backward] in
  // offload.cc); false: each runs as soon as its gradient is on the host.
  bool steps_after_backward = false;
  // With steps_after_backward: a gradient whose optimizer states live on
  // NVMe goes on to NVMe and is read back with them for its step, as
  // DeepSpeed swaps gradients out with the states (swap_out_gradients in
  // partitioned_optimizer_swapper.py), instead of waiting on the host.
  bool gradients_to_nvme = false;

  bool any() const { return optimizer != Tier::kDevice || params != Tier::kDevice; }
  Tier optimizer_tier(size_t state) const {
    return optimizer_of.empty() ? optimizer : optimizer_of[state];
  }
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
  // A device chunk's parameter (Note [Device chunks]): `step` is its own
  // device step, not rewritten; update and apply are none.
  bool on_device = false;
  // Also on_device: a paged optimizer's (OffloadOptions::paged), whose
  // states live on the host and come in for the step.
  bool paged = false;
};

struct OffloadGraph {
  Graph graph;
  std::vector<OffloadedState> states;  // in step order
  // Parameters without a step (Note [Frozen parameters] in offload.cc).
  std::vector<BufferId> frozen;
};

// Rewrites every per-parameter optimizer step (model_states in
// optimizer_steps.h; a step of several ops is fused into one first) for a
// CPU optimizer (Note [Offloaded optimizer step] in offload.cc), except the
// steps of device chunks (options.optimizer_of), which stay as they are. A
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

// Note [Optimizer chunks]: the optimizer states of og's parameters grouped,
// in step order, into chunks of at least `chunk_bytes` (a layer's
// parameters, roughly, at 64 MiB), and a `host_share` of their bytes put on
// the host, the rest on NVMe, spread evenly over the chunks (each chunk goes
// to the host while the host's running total stays within the share of the
// running total), so NVMe reads and writes interleave with the CPU steps of
// host chunks instead of bunching. host_share in [0, 1]. `spread` false:
// the first chunks in step order go to the host until the share is
// reached, the rest to NVMe (PatrickStar's fill in order of use). A
// `device_share` of the bytes stays on the device (Note [Device chunks] in
// offload.cc), spread the same way and chosen before the host's chunks;
// host_share + device_share <= 1. Returns OffloadOptions::optimizer_of.
inline constexpr uint64_t kOptimizerChunkBytes = uint64_t{64} << 20;
// The chunk size a split uses: 64 MiB, or a 32nd of the states when they
// are smaller than 2 GiB (at least 1 MiB), so that a small model still has
// chunks to share out.
uint64_t optimizer_chunk_bytes(const OffloadGraph& og);
std::vector<Tier> split_optimizer_states(const OffloadGraph& og, double host_share,
                                         uint64_t chunk_bytes = kOptimizerChunkBytes,
                                         bool spread = true, double device_share = 0);
// The bytes of one OffloadGraph::states entry's optimizer states, and of all.
uint64_t optimizer_state_bytes(const OffloadGraph& og, size_t state);
uint64_t optimizer_state_bytes(const OffloadGraph& og);

// og.graph with the device weight of what `options` moves off the device
// set to 0 bytes: optimizer states and gradients (which leave right after
// they are made) when the optimizer is offloaded, the CPU step's output and
// workspace, and offloaded parameters (brought in per use). Op and buffer
// ids are kept.
Graph planning_view(const OffloadGraph& og, const OffloadOptions& options);

}  // namespace memwall
