// `memwall bench plan`'s measure of the automatic planner on one model and
// budget: its plan against the best single technique, every plan
// re-simulated within its budget (the simulator is the judge).
#pragma once

#include <cstdint>
#include <string>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"

namespace memwall {

struct AutoVersusSingles {
  uint64_t budget = 0;
  bool auto_fits = false;
  double auto_time = 0;
  std::string auto_config;  // "model states; activation planner"
  std::string best_single;  // empty: no single technique fits
  double best_single_time = 0;
  bool within_budget = true;  // every fitting plan, re-simulated, stays within its budget
  double seconds = 0;         // planning time
  std::string why;            // when auto does not fit
};

// plan_auto for `budget` with `time_limit` seconds, and its table of single
// techniques; an Error from the planner is the row's `why`.
AutoVersusSingles compare_with_singles(const Graph& graph, const Hardware& hw, uint64_t budget,
                                       double time_limit);

}  // namespace memwall
