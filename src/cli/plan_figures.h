// The NVMe swap space `memwall run` reserves for a plan: the figure needs
// the runtime's constants, which no module below exec may include
// (DESIGN.md); the other figures of a plan are report's
// (memwall/report/plan_figures.h).
#pragma once

#include "memwall/plan/nvme_reservation.h"
#include "memwall/report/plan_figures.h"

namespace memwall::cli {

// The swap space `memwall run` reserves for the plan, in the blocks it
// picks within the NVMe engine's bounds: the executor's own figure.
NvmeReservation run_nvme_reservation(const Graph& graph, const Plan& plan);

}  // namespace memwall::cli
