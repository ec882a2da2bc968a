// selective: Korthikanti et al. 2022, "Reducing Activation Recomputation in
// Large Transformer Models", sec. 5: recompute only the attention core's
// s x s part — QK^T, the softmax and the attention dropout — whose saved
// tensors (softmax output 2as^2b, dropout mask as^2b and output 2as^2b per
// layer, in 16-bit) grow with s^2 but take little compute to redo. All
// other activations are kept.
//
// The s x s tensors are the droppable outputs of softmax and dropout ops
// shaped [batch, heads, s, s]. Graphs without them (CNNs, or flash
// attention, which saves no s x s tensor) get the keep-all plan, and the
// note says so.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "memwall/graph/graph.h"
#include "memwall/plan/builders.h"
#include "planner_common.h"

namespace memwall {
namespace {

bool is_attention_square(const Graph& graph, const Op& producer, BufferId b) {
  if (producer.type != "softmax" && producer.type != "dropout") return false;
  const Dims& shape = graph.buffers[b].shape;
  return shape.size() == 4 && shape[2] == shape[3];
}

}  // namespace

RematResult plan_selective(const Graph& graph, const Hardware& hardware, uint64_t budget,
                           const RematOptions& /*options*/) {
  const remat_detail::Stopwatch clock;
  const std::vector<uint8_t> droppable = droppable_activations(graph);
  std::vector<uint8_t> keep(graph.buffers.size(), 1);
  size_t dropped = 0;
  for (const Op& op : graph.ops) {
    if (op.phase != Phase::kForward) continue;
    for (const BufferId b : op.out) {
      if (droppable[b] && is_attention_square(graph, op, b)) {
        keep[b] = 0;
        ++dropped;
      }
    }
  }
  if (dropped == 0) {
    return remat_detail::finish(graph, hardware, budget, default_plan(graph, hardware.name, budget),
                                "selective",
                                "no saved s x s attention tensor (no plain attention): keeps "
                                "everything",
                                clock);
  }
  Plan plan = remat_detail::checkpoint_plan(graph, hardware, budget, keep);
  std::string note = fmt::format("recomputes {} s x s attention tensors ({} bytes)", dropped,
                                 dropped_bytes(graph, keep));
  return remat_detail::finish(graph, hardware, budget, std::move(plan), "selective",
                              std::move(note), clock);
}

}  // namespace memwall
