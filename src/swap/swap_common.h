// Helpers the activation-swapping planners share (internal to src/swap).
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "memwall/base/stopwatch.h"
#include "memwall/swap/activations.h"

namespace memwall::swap_detail {

using memwall::Stopwatch;

// Checks the plan fits (require_fit) and wraps it as a result, with the
// simulator's figures and the count of each kind of eviction.
inline SwapResult finish(const Graph& graph, const Hardware& hardware, uint64_t budget,
                         const SwapSchedule& schedule, std::string_view planner, std::string note,
                         const Stopwatch& clock) {
  const SimResult sim = require_fit(graph, hardware, schedule.plan, budget, planner);
  SwapResult result;
  result.plan = schedule.plan;
  result.planner = std::string(planner);
  result.simulated_peak = device_peak(sim);
  result.simulated_time = sim.iteration_time;
  result.bytes_swapped_out = sim.bytes_moved[static_cast<int>(Resource::kD2H)];
  for (const Eviction& e : schedule.evictions) {
    ++(e.how == Eviction::How::kSwap ? result.swapped : result.recomputed);
  }
  result.note = std::move(note);
  result.solve_seconds = clock.seconds();
  return result;
}

inline void check_tier(Tier tier, std::string_view planner) {
  if (tier == Tier::kDevice)
    fail("{}: swapped activations go to host or nvme, not the device", planner);
}

}  // namespace memwall::swap_detail
