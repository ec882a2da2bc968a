// vDNN (Rhu et al., "vDNN: Virtualized Deep Neural Networks for Scalable,
// Memory-Efficient Neural Network Design", MICRO 2016), on memwall's op
// graphs (docs/swap-vdnn.md).
//
// Note [vDNN on an op graph]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// vDNN works layer by layer: in forward, once a layer has read its input
// feature map X, X is offloaded to the host (vDNN-all: every layer;
// vDNN-conv: convolutional layers only) unless a later layer still reads it;
// in backward, while a layer's backward runs, the X of the nearest earlier
// offloaded layer is prefetched. Here a layer is a forward op. Each forward op's inputs that are
// activations saved for backward are offloaded right after the last forward
// op reading them (for a buffer read by several layers, such as a residual,
// that is the last of them), and come back for their first backward use. The
// prefetch goes one offloaded layer ahead: the buffers first needed by
// backward op c_k are prefetched while the backward op c_{k-1} that needs
// the previous offloaded buffers runs (the first ones just in time). That
// point is the earliest the swap scheduler may use; it moves a prefetch
// later only where it would exceed the budget (Note [Swap scheduling]).
// What is offloaded does not depend on the budget.
//
// A forward-only program (no backward op) has no backward to prefetch for,
// but its activations read again after a gap (read_again_later: a U-Net's
// skips at inference) are what vDNN would offload: each forward op's such
// inputs go out after the use before their largest gap and come back for
// the use after it, prefetched one offloaded layer ahead in the same way.
#include <algorithm>
#include <optional>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "memwall/base/deadline.h"
#include "memwall/graph/graph.h"
#include "swap_common.h"

namespace memwall {

bool is_convolution(const Op& op) {
  return op.phase == Phase::kForward && op.type.starts_with("conv");
}

namespace {

// The gap vDNN offloads b across: from its last forward use to its next use;
// in a forward-only program its largest gap (Note [vDNN on an op graph]).
std::optional<Eviction> offload_gap(const Graph& graph, const BufferUses& uses, BufferId b,
                                    bool backward) {
  if (!backward) return largest_gap(uses, b, 2);
  const std::span<const OpId> used = uses.of(b);
  for (size_t k = used.size(); k-- > 0;) {
    if (graph.ops[used[k]].phase != Phase::kForward) continue;
    if (k + 1 == used.size() || used[k + 1] - used[k] < 2) return std::nullopt;
    return Eviction{.buf = b, .after = used[k], .before = used[k + 1]};
  }
  return std::nullopt;
}

SwapResult plan_vdnn_impl(const Graph& graph, const Hardware& hardware, uint64_t budget,
                          const SwapOptions& options, bool conv_only, std::string_view planner) {
  const swap_detail::Stopwatch clock;
  const Deadline deadline = work_deadline(options.time_limit);
  swap_detail::check_tier(options.tier, planner);
  const BufferUses uses(graph);
  const bool backward = has_backward(graph);
  std::vector<Eviction> evictions;
  uint64_t offloaded_bytes = 0;
  for (const BufferId b : vdnn_offloaded(graph, conv_only)) {
    Eviction e = *offload_gap(graph, uses, b, backward);
    e.to = options.tier;
    evictions.push_back(e);
    offloaded_bytes += graph.buffers[b].bytes;
  }
  // One offloaded layer ahead: group by the (backward) op needing them.
  std::vector<OpId> consumers;
  for (const Eviction& e : evictions) consumers.push_back(e.before);
  std::sort(consumers.begin(), consumers.end());
  consumers.erase(std::unique(consumers.begin(), consumers.end()), consumers.end());
  for (Eviction& e : evictions) {
    const auto it = std::lower_bound(consumers.begin(), consumers.end(), e.before);
    e.prefetch_after = it == consumers.begin() ? e.before - 1 : *std::prev(it);
  }
  const SwapSchedule schedule =
      schedule_swaps(graph, hardware, budget, evictions, {.time_limit = deadline.left()});
  const std::string note = fmt::format(
      "offloaded {} {}inputs ({} bytes) to {}, {} scheduler repair rounds", evictions.size(),
      conv_only ? "convolution " : "", offloaded_bytes, to_string(options.tier), schedule.repairs);
  return swap_detail::finish(graph, hardware, budget, schedule, planner, note, clock);
}

}  // namespace

std::vector<BufferId> vdnn_offloaded(const Graph& graph, bool conv_only) {
  const std::vector<uint8_t> saved = read_again_later(graph);
  const bool backward = has_backward(graph);
  std::vector<uint8_t> input(graph.buffers.size(), 0);
  for (const Op& op : graph.ops) {
    if (op.phase != Phase::kForward || (conv_only && !is_convolution(op))) continue;
    for (const BufferId b : op.in) input[b] = saved[b];
  }
  const BufferUses uses(graph);
  std::vector<BufferId> out;
  for (size_t b = 0; b < input.size(); ++b) {
    if (input[b] && offload_gap(graph, uses, static_cast<BufferId>(b), backward)) {
      out.push_back(static_cast<BufferId>(b));
    }
  }
  return out;
}

SwapResult plan_vdnn(const Graph& graph, const Hardware& hardware, uint64_t budget,
                     const SwapOptions& options) {
  return plan_vdnn_impl(graph, hardware, budget, options, /*conv_only=*/false, "vdnn");
}

SwapResult plan_vdnn_conv(const Graph& graph, const Hardware& hardware, uint64_t budget,
                          const SwapOptions& options) {
  return plan_vdnn_impl(graph, hardware, budget, options, /*conv_only=*/true, "vdnn-conv");
}

}  // namespace memwall
