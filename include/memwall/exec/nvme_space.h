// The NVMe swap space `memwall run` reserves for a plan: the plan's NVMe
// reservation (memwall/plan/nvme_reservation.h) in the blocks the runtime's
// NVMe engine picks within its bounds. `memwall plan`, `simulate` and the
// Python package print it beside the simulator's peak NVMe use.
#pragma once

#include "memwall/graph/types.h"
#include "memwall/plan/nvme_reservation.h"
#include "memwall/plan/plan.h"

namespace memwall::exec {

NvmeReservation run_nvme_reservation(const Graph& graph, const Plan& plan);

}  // namespace memwall::exec
