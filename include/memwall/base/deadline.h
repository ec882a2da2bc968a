// A point in wall-clock time that a planner must return by.
#pragma once

#include <algorithm>
#include <chrono>
#include <limits>

namespace memwall {

// Note [Time limits are wall time]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A planner's time limit (RematOptions::time_limit, PlannerOptions::
// time_limit, `--time-limit`) is a promise about wall time: the call
// returns within the limit plus a small margin (docs/planner.md, "Time
// limits"), however loaded the machine is. Layout budgets count CPU time
// instead (Note [CPU-time budgets]): there the answer must not depend on
// the load, and a layout is cheap to wait for. A planner that orchestrates
// others turns its limit into a Deadline when it starts and gives each
// callee what is left (Deadline::left), so that the callees' limits add up
// to the caller's; searches check passed() between steps of bounded cost.
// A planner's own work stops at work_deadline(limit), which leaves the end
// of the limit (finish_reserve) for the simulation of its final plan.
class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  Deadline() = default;  // never
  static Deadline in(double seconds) {
    Deadline d;
    if (seconds < 1e9)
      d.at_ = Clock::now() +
              std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    return d;
  }

  // Seconds until the deadline: negative once it has passed, +inf for never.
  double left() const {
    if (at_ == Clock::time_point::max()) return std::numeric_limits<double>::infinity();
    return std::chrono::duration<double>(at_ - Clock::now()).count();
  }
  bool passed() const { return at_ != Clock::time_point::max() && Clock::now() >= at_; }
  Clock::time_point when() const { return at_; }
  // The earlier of this and `seconds` from now.
  Deadline within(double seconds) const {
    Deadline d = in(seconds);
    d.at_ = std::min(d.at_, at_);
    return d;
  }

 private:
  Clock::time_point at_ = Clock::time_point::max();
};

// What a planner keeps of its limit for after its search: one simulation of
// its plan and the result (Note [Time limits are wall time]).
inline double finish_reserve(double time_limit) { return std::min(0.25, 0.1 * time_limit); }
inline Deadline work_deadline(double time_limit) {
  return Deadline::in(time_limit - finish_reserve(time_limit));
}

}  // namespace memwall
