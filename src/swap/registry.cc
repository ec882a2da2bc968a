// The registry of activation-swapping planners (activations.h), in display
// order: vDNN's static policies, then Capuchin's budget-driven one.
#include <algorithm>
#include <array>

#include "memwall/swap/activations.h"

namespace memwall {
namespace {

constexpr std::array kPlanners = {
    SwapPlanner{"vdnn",
                "offload every layer's saved input in forward, prefetch one layer ahead in "
                "backward (Rhu et al. 2016, vDNN-all)",
                plan_vdnn},
    SwapPlanner{"vdnn-conv",
                "offload only convolutions' saved inputs, prefetch one layer ahead (Rhu et al. "
                "2016, vDNN-conv)",
                plan_vdnn_conv},
    SwapPlanner{"capuchin",
                "evict tensors spanning the peak: swap when the transfer hides, else swap or "
                "recompute by memory saved per second (Peng et al. 2020, Capuchin)",
                plan_capuchin},
};

}  // namespace

std::span<const SwapPlanner> swap_planners() { return kPlanners; }

const SwapPlanner* find_swap_planner(std::string_view name) {
  const auto it = std::find_if(kPlanners.begin(), kPlanners.end(),
                               [&](const SwapPlanner& p) { return p.name == name; });
  return it == kPlanners.end() ? nullptr : &*it;
}

}  // namespace memwall
