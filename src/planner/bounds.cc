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
#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "memwall/graph/error.h"
#include "memwall/graph/graph.h"
#include "memwall/planner/planner.h"
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

LowerBound iteration_lower_bound(const Graph& graph, const Hardware& hardware,
                                 const PlannerOptions& options) {
  LowerBound b;
  for (const Op& op : graph.ops) {
    if (op.phase == Phase::kForward || op.phase == Phase::kBackward) {
      b.compute += op_time(hardware, graph, op);
    }
  }
  // Per-parameter bytes of parameters, states and gradients. Without
  // per-parameter steps nothing can leave the device (the planner keeps to
  // the configuration that needs no rewrite): no transfer is forced.
  uint64_t params = 0, states = 0, grads = 0;
  std::vector<ModelState> steps;
  try {
    steps = model_states(graph);
  } catch (const Error&) {
    steps.clear();
  }
  for (const ModelState& s : steps) {
    params += graph.buffers[s.param].bytes;
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
  const Hardware rank = rank_share(node, static_cast<int>(ranks));
  const double pcie = static_cast<double>(excess) * per_state_byte / rank.d2h_bandwidth;
  const uint64_t host = rank.host_memory_bytes;
  const double nvme =
      excess > host ? static_cast<double>(excess - host) / rank.nvme_read_bandwidth : 0;
  b.transfer = std::max(pcie, nvme);
  b.seconds = std::max(b.compute, b.transfer);
  if (b.transfer > b.compute) {
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
