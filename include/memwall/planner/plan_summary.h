// What `memwall plan` prints of an automatic plan (and of a single
// technique's, and the Python package's print(plan)): the summary table,
// the side-by-side table of single techniques and --json's object. Rows
// through report's (memwall/report/format.h, plan_figures.h): the planner
// owns AutoPlan, which report may not see (docs/architecture.md).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/plan/nvme_reservation.h"
#include "memwall/planner/planner.h"

namespace memwall {

// The summary of `a`'s plan of `graph` (the work as given) on `hw` with
// `ranks` ranks, under `strategy`: the header line and one row per figure,
// the skipped configurations last. `default_budget`: the budget was not
// given (the row says what it is made of). `nvme`: the swap space `memwall
// run` reserves for the plan (the runtime's figure, passed in).
std::string auto_plan_text(const Graph& graph, const AutoPlan& a, const Hardware& hw, int ranks,
                           std::string_view strategy, bool default_budget,
                           const NvmeReservation& nvme);

// The same work under each single technique, beside auto's plan.
std::string technique_table(const AutoPlan& a);

// --json's object of the same (the caller adds "layout" and its own keys).
nlohmann::json auto_plan_json(const Graph& graph, const AutoPlan& a, const Hardware& hw, int ranks,
                              const NvmeReservation& nvme);

}  // namespace memwall
