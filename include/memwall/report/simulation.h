// What `memwall simulate` (and the Python package's plan.simulate) says of
// a plan the simulator judged: valid or why not, iteration time, compute
// and stalls, peaks per tier (per node when ranks share one), bytes moved
// per link, as a table and JSON.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/plan/nvme_reservation.h"
#include "memwall/plan/plan.h"
#include "memwall/sim/simulator.h"

namespace memwall {

// A plan of `graph` on `hw` and its simulation `r`; `plan_file` names the
// plan ("" for the default plan); `nvme` is the swap space the runtime
// reserves for it (the executor's figure, memwall/report/plan_figures.h).
struct SimulationReport {
  const Graph& graph;
  const Plan& plan;
  const Hardware& hw;
  const SimResult& result;
  std::string plan_file;
  NvmeReservation nvme;
};

nlohmann::json simulation_json(const SimulationReport& s);
// The table, without the rows of files written.
std::string simulation_text(const SimulationReport& s);

}  // namespace memwall
