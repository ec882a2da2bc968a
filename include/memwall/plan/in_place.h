// Which plan steps run in place (Note [In-place steps] in src/plan/in_place.cc):
// shared by the simulator, which judges a plan, and the executor, which runs it.
#pragma once

#include <cstdint>
#include <vector>

#include "memwall/graph/types.h"
#include "memwall/plan/plan.h"

namespace memwall {

// Per step of the plan: 1 when it is a device compute or recompute step that
// runs in place, taking over the device memory of the previous version of a
// buffer its op creates; 0 otherwise. The plan must have passed
// validate_plan against the graph (ids in range).
std::vector<uint8_t> in_place_steps(const Graph& graph, const Plan& plan);

}  // namespace memwall
