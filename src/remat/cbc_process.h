// Solving a CBC model in a child process that a wall-clock deadline can
// stop (Note [Hard deadline] in cbc_process.cc): checkmate's names for
// memwall/remat/cbc_solve.h.
#pragma once

#include "memwall/remat/cbc_solve.h"

#ifdef MEMWALL_HAVE_CBC
namespace memwall::remat_detail {

using CbcAnswer = memwall::CbcAnswer;

inline CbcAnswer solve_in_child(Cbc_Model* model, Deadline deadline) {
  return solve_cbc_in_child(model, deadline, "checkmate: CBC");
}

}  // namespace memwall::remat_detail
#endif
