// The figures `memwall plan` and `run` print that need a module report may
// not use (DESIGN.md): the throughput the planner computes (Note
// [Throughput] in src/planner/throughput.cc) and the NVMe swap space the
// runtime reserves. The other figures are report's
// (memwall/report/plan_figures.h).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "memwall/plan/nvme_reservation.h"
#include "memwall/planner/planner.h"
#include "memwall/report/plan_figures.h"

namespace memwall::cli {

// "throughput" row: samples/s, tokens/s, MFU and what they count.
std::string throughput_row(const Throughput& t, double iteration_time);
nlohmann::json throughput_json(const Throughput& t);

// The swap space `memwall run` reserves for the plan, in the blocks it
// picks within the NVMe engine's bounds: the executor's own figure.
NvmeReservation run_nvme_reservation(const Graph& graph, const Plan& plan);

}  // namespace memwall::cli
