// Solving a CBC model in a child process that a wall-clock deadline can
// stop (Note [Hard deadline] in src/remat/cbc_process.cc): checkmate's
// MILP and the pipeline placement's integer programme.
#pragma once

#include <string_view>
#include <vector>

#ifdef MEMWALL_HAVE_CBC
#include "Cbc_C_Interface.h"
#endif
#include "memwall/base/deadline.h"

namespace memwall {

#ifdef MEMWALL_HAVE_CBC
// CBC's answer from the child.
struct CbcAnswer {
  bool finished = false;  // CBC returned; false: killed at the deadline, nothing else known
  std::vector<double> x;  // its best solution; empty when it has none
  double objective = 0;
  double bound = 0;  // the best possible objective it proved
  bool proven_optimal = false;
  bool proven_infeasible = false;
};

// Cbc_solve(model) in a child process (run_in_child, src/remat/
// child_process.h), killed at `deadline`; `model` is left unsolved in this
// process. `what` names the solve in errors ("checkmate: CBC").
CbcAnswer solve_cbc_in_child(Cbc_Model* model, Deadline deadline, std::string_view what);
#endif

}  // namespace memwall
