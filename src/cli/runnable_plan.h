// Kept for `memwall run` (run.cc), which other work of issue 46 moves:
// whether a plan runs is the planner's now (memwall/planner/runnable_plan.h,
// Note [Plans that run]). Remove once nothing here includes
// "runnable_plan.h".
#pragma once

#include "memwall/planner/runnable_plan.h"
