// The registry of rematerialization planners (remat.h), in display order:
// baselines from the simplest to the optimal ones.
#include <algorithm>
#include <array>

#include "memwall/remat/remat.h"

namespace memwall {
namespace {

constexpr std::array kPlanners = {
    RematPlanner{"keep-all", "keep every activation (the default plan, no recomputation)",
                 plan_keep_all},
    RematPlanner{"per-layer",
                 "keep each layer's / block's input, recompute the layer in backward "
                 "(Megatron-LM, Hugging Face)",
                 plan_per_layer},
    RematPlanner{"selective", "recompute only attention's s x s part (Korthikanti et al. 2022)",
                 plan_selective},
    RematPlanner{"selective-op",
                 "per layer, keep the matmul outputs but every second one and the attention "
                 "kernel's, recompute the rest (torchtitan's op-level selective AC)",
                 plan_selective_op},
    RematPlanner{"chen-sqrt", "checkpoint every sqrt(n)-th articulation point (Chen et al. 2016)",
                 plan_chen_sqrt},
    RematPlanner{"chen-greedy",
                 "budget-driven greedy segmentation, threshold searched (Chen et al. 2016)",
                 plan_chen_greedy},
    // ---- Optimal planners (rotor*.cc, checkmate*.cc) go here: ----------------
    RematPlanner{"rotor",
                 "optimal checkpointing of the linearized chain by dynamic programming "
                 "(Beaumont et al. 2019, Rotor)",
                 plan_rotor},
    RematPlanner{"checkmate",
                 "MILP over the R, S, FREE matrices solved with CBC under a time limit "
                 "(Jain et al. 2020, Checkmate)",
                 plan_checkmate},
    // Online greedy eviction (dtr*.cc, docs/remat-dtr.md).
    RematPlanner{"dtr", "evict by cost / (memory x staleness) of the evicted neighborhood (DTR)",
                 plan_dtr},
    RematPlanner{"dtr-eqclass", "DTR with the union-find approximation of the evicted neighborhood",
                 plan_dtr_eqclass},
    RematPlanner{"dtr-lru", "DTR evicting the least recently used buffer", plan_dtr_lru},
    RematPlanner{"dtr-largest", "DTR evicting the largest buffer", plan_dtr_largest},
    // memwall's own planner (memwall*.cc, docs/remat-memwall.md).
    RematPlanner{"memwall",
                 "op-level keep-set search plus structured proposers, judged by the simulator "
                 "(memwall)",
                 plan_memwall},
    // ---------------------------------------------------------------------------
};

}  // namespace

std::span<const RematPlanner> remat_planners() { return kPlanners; }

const RematPlanner* find_remat_planner(std::string_view name) {
  const auto it = std::find_if(kPlanners.begin(), kPlanners.end(),
                               [&](const RematPlanner& p) { return p.name == name; });
  return it == kPlanners.end() ? nullptr : &*it;
}

}  // namespace memwall
