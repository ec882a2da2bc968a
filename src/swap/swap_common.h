// Helpers the activation-swapping planners share (internal to src/swap).
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>

#include "memwall/swap/activations.h"

namespace memwall::swap_detail {

class Stopwatch {
 public:
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// Checks the plan fits (swap_require_fit) and wraps it as a result, with the
// simulator's figures and the count of each kind of eviction.
inline SwapResult finish(const Graph& graph, const Hardware& hardware, uint64_t budget,
                         const SwapSchedule& schedule, std::string_view planner, std::string note,
                         const Stopwatch& clock) {
  const SimResult sim = swap_require_fit(graph, hardware, schedule.plan, budget, planner);
  SwapResult result;
  result.plan = schedule.plan;
  result.planner = std::string(planner);
  result.simulated_peak = sim.peak_bytes[static_cast<int>(Tier::kDevice)];
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
