// The default budget and the lower bound on an iteration's time.
//
// Note [Framework reserve]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// A training process never gets the whole device: the CUDA context with
// PyTorch's kernels takes several hundred MiB (PyTorch's "CUDA semantics"
// notes that it is not counted by memory_allocated; CUDA 11.7's lazy loading
// shrinks but does not remove it), cuBLAS keeps workspaces per stream, and
// NCCL its buffers. memwall keeps 1 GiB back on every GPU, plus 2% of the
// memory above 16 GiB for the allocator's slack on large devices. `--budget`
// overrides it.
//
// Note [Lower bound]
// ~~~~~~~~~~~~~~~~~~
// No plan beats max(compute, transfer):
// - compute: the device compute of forward and backward once, nothing
//   recomputed (optimizer steps may run on the CPU, overlapped, so they are
//   left out);
// - transfer: let S be the smallest per-rank footprint of parameters and
//   optimizer states the allowed ZeRO stages reach, and E = S - budget its
//   excess. Those bytes live off the device; every iteration updates every
//   state, so each excess byte either crosses PCIe or stays with a CPU step
//   that needs its parameter's gradient sent out instead: at least
//   E x (gradient bytes / state bytes per parameter) leave the device. Of E,
//   what exceeds host memory lives on NVMe and is read once per iteration.
//   With several ranks on a node, host memory and both links are the rank's
//   share of the node's (Note [Ranks on a node] in hw/ranks.cc). A graph
//   whose optimizer ops are not per-parameter steps (Note [Traced optimizer
//   steps] in swap/optimizer_steps.cc) cannot move its states: no term.
// Both transfer terms are bandwidth-only (no latency): a bound, loose when
// activations dominate, tight when model states do.
// Two more terms count the work that must follow a gradient. No gradient
// exists before the forward pass has run (every gradient descends from the
// loss), and an optimizer step, and any write of what it updated, follows
// its gradient. So, with F the forward pass's device compute:
// - CPU: a parameter's optimizer step runs where its states live (on the
//   device when they are there, else on the CPU: ZeRO-Offload's rule, which
//   every memwall plan follows, device chunks included). States that live
//   on the device are there throughout the iteration, so also while the
//   forward or backward op with the largest working set W (its inputs,
//   outputs and workspace, none of them optimizer states) runs: the device
//   holds at most budget - W bytes of them, and at least a share
//   1 - (budget - W) / states is stepped by the CPU, each parameter at the
//   profile's CPU Adam rate: F + that share x (parameters / rate).
// - NVMe write: what exceeds device and host memory lives on NVMe and is
//   updated every iteration, so written back after its step: F + those
//   bytes / the NVMe write bandwidth.
// Neither counts the backward pass that runs beside the CPU, nor the host
// memory the parameters, gradients and staging take: lower bounds, tight
// when the CPU or the drive is the bottleneck from the first gradient on.
#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/graph/counts.h"
#include "memwall/graph/graph.h"
#include "memwall/planner/planner.h"
#include "memwall/remat/remat.h"
#include "memwall/swap/zero.h"

namespace memwall {

uint64_t framework_reserve(const Hardware& hardware) {
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  const uint64_t above =
      hardware.device_memory_bytes > 16 * kGiB ? hardware.device_memory_bytes - 16 * kGiB : 0;
  return std::min(hardware.device_memory_bytes, kGiB + above / 50);
}

uint64_t default_budget(const Hardware& hardware) {
  return hardware.device_memory_bytes - framework_reserve(hardware);
}

namespace {

// The most device memory one forward or backward op needs while it runs
// (op_working_set: parameters included, none of them an optimizer state).
uint64_t largest_working_set(const Graph& graph) {
  uint64_t largest = 0;
  for (const Op& op : graph.ops) {
    if (op.phase != Phase::kForward && op.phase != Phase::kBackward) continue;
    const OpWorkingSet set = op_working_set(graph, op);
    largest = std::max(largest, checked_add(set.transient, set.persistent, "an op's working set"));
  }
  return largest;
}

}  // namespace

LowerBound iteration_lower_bound(const Graph& graph, const Hardware& hardware,
                                 const PlannerOptions& options) {
  LowerBound b;
  for (const Op& op : graph.ops) {
    if (op.phase == Phase::kForward || op.phase == Phase::kBackward) {
      const double t = op_time(hardware, graph, op);
      b.compute += t;
      if (op.phase == Phase::kForward) b.forward += t;
    }
  }
  // Per-parameter bytes of parameters, states and gradients. Without
  // per-parameter steps nothing can leave the device (the planner keeps to
  // the configuration that needs no rewrite): no transfer is forced.
  uint64_t params = 0, states = 0, grads = 0, param_elements = 0;
  std::vector<ModelState> steps;
  try {
    steps = model_states(graph);
  } catch (const Error&) {
    steps.clear();
  }
  for (const ModelState& s : steps) {
    params += graph.buffers[s.param].bytes;
    param_elements += element_count(graph.buffers[s.param]);
    grads += graph.buffers[s.grad].bytes;
    for (const BufferId st : s.states) states += graph.buffers[st].bytes;
  }
  const int max_stage = options.zero_stage.value_or(options.ranks > 1 ? 3 : 0);
  const auto ranks = static_cast<uint64_t>(std::max(options.ranks, 1));
  const uint64_t shard_states = max_stage >= 1 ? states / ranks : states;
  const uint64_t shard_params = max_stage >= 3 ? params / ranks : params;
  const uint64_t footprint = shard_states + shard_params;
  const uint64_t budget = options.budget > 0 ? options.budget : default_budget(hardware);
  const uint64_t excess = footprint > budget ? footprint - budget : 0;
  const double per_state_byte =
      params + states > 0
          ? std::min(1.0, static_cast<double>(grads) / static_cast<double>(params + states))
          : 0;
  // The rank's share of its node's host memory and links.
  Hardware node = hardware;
  if (options.host_bytes > 0) node.host_memory_bytes = options.host_bytes;
  const Hardware rank = rank_share(node, static_cast<int>(ranks) * graph_tensor_parallel(graph));
  const double pcie = static_cast<double>(excess) * per_state_byte / rank.d2h_bandwidth;
  const uint64_t host = rank.host_memory_bytes;
  const double nvme =
      excess > host ? static_cast<double>(excess - host) / rank.nvme_read_bandwidth : 0;
  b.transfer = std::max(pcie, nvme);
  // The CPU's share of the steps, and what only NVMe holds, after the forward pass.
  const uint64_t working = largest_working_set(graph);
  const uint64_t room = budget > working ? budget - working : 0;
  const double cpu_share = shard_states > room ? static_cast<double>(shard_states - room) /
                                                     static_cast<double>(shard_states)
                                               : 0;
  const double rank_params =
      static_cast<double>(param_elements) / static_cast<double>(max_stage >= 1 ? ranks : 1);
  if (cpu_share > 0 && rank.cpu_adam_params_per_s > 0) {
    b.cpu = b.forward + cpu_share * rank_params / rank.cpu_adam_params_per_s;
  }
  if (excess > host && rank.nvme_write_bandwidth > 0) {
    b.nvme_write = b.forward + static_cast<double>(excess - host) / rank.nvme_write_bandwidth;
  }
  b.seconds = std::max({b.compute, b.transfer, b.cpu, b.nvme_write});
  if (b.cpu >= b.seconds && b.cpu > b.compute) {
    b.why = fmt::format(
        "the forward pass, then the CPU steps of the {:.0f}% of optimizer states the device "
        "cannot hold",
        100 * cpu_share);
  } else if (b.nvme_write >= b.seconds && b.nvme_write > b.compute) {
    b.why = fmt::format(
        "the forward pass, then writing back to NVMe the {} bytes of model states beyond device "
        "and host memory",
        excess - host);
  } else if (b.transfer > b.compute) {
    b.why =
        nvme >= pcie
            ? fmt::format("model states beyond device and host memory read from NVMe ({} bytes)",
                          excess - host)
            : fmt::format(
                  "model states beyond the budget ({} bytes) traded for gradients "
                  "over PCIe",
                  excess);
  } else {
    b.why = "device compute of forward and backward";
  }
  return b;
}

}  // namespace memwall
