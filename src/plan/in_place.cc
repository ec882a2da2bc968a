// Which plan steps run in place (in_place.h).
//
// Note [In-place steps]
// ~~~~~~~~~~~~~~~~~~~~~
// A device compute step whose op creates the next version of a buffer runs
// in place, taking over the previous version's device memory, when the plan
// does not read that version's device copy again (no later step reads it or
// swaps it out before it is freed, brought back in or created again).
// Otherwise it runs out of place and the new version gets memory of its own
// (Note [Buffer versions]). The simulator charges memory by this decision
// and the executor runs the op by it, so both take it from here.
// One backward pass over the steps: O(steps + edges). validate_plan has
// checked every step's op and buffer ids.
#include "memwall/plan/in_place.h"

namespace memwall {

std::vector<uint8_t> in_place_steps(const Graph& graph, const Plan& plan) {
  const auto& steps = plan.steps;
  std::vector<uint8_t> read_later(graph.buffers.size(), 0);
  std::vector<uint8_t> in_place(steps.size(), 0);
  for (size_t i = steps.size(); i-- > 0;) {
    const Step& s = steps[i];
    const bool on_device = s.on != Tier::kHost;
    switch (s.kind) {
      case StepKind::kCompute:
      case StepKind::kRecompute: {
        const Op& op = graph.ops[s.op];
        for (const BufferId v : op.out) {
          const BufferId prev = graph.buffers[v].version_of;
          if (on_device && prev != kNoBuffer && !read_later[prev]) in_place[i] = 1;
        }
        for (const BufferId b : op.out) read_later[b] = 0;
        for (const BufferId b : op.in) read_later[b] = 1;
        for (const BufferId b : op.updates) read_later[b] = 1;
        break;
      }
      case StepKind::kSwapOut:
        read_later[s.buf] = 1;
        break;
      case StepKind::kSwapIn:
        if (s.to == Tier::kDevice) read_later[s.buf] = 0;
        break;
      case StepKind::kFree:
        read_later[s.buf] = 0;
        break;
    }
  }
  return in_place;
}

}  // namespace memwall
