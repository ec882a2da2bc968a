// Solving a CBC model in a child process that a wall-clock deadline can
// stop (Note [Hard deadline] in cbc_process.cc). Internal to src/remat.
#pragma once

#include <vector>

#include "Cbc_C_Interface.h"
#include "memwall/base/deadline.h"

namespace memwall::remat_detail {

// CBC's answer from the child.
struct CbcAnswer {
  bool finished = false;  // CBC returned; false: killed at the deadline, nothing else known
  std::vector<double> x;  // its best solution; empty when it has none
  double objective = 0;
  double bound = 0;  // the best possible objective it proved
  bool proven_optimal = false;
  bool proven_infeasible = false;
};

// Cbc_solve(model) in a child process (run_in_child, child_process.h),
// killed at `deadline`; `model` is left unsolved in this process.
CbcAnswer solve_in_child(Cbc_Model* model, Deadline deadline);

}  // namespace memwall::remat_detail
