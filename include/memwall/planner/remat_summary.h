// What `memwall plan --strategy remat[:NAME]` prints of a
// rematerialization planner's plan (and the Python package's print(plan)):
// the summary table and --json's object. The caller adds what it wrote
// (--out, the layout, exports).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/remat/runner.h"
#include "memwall/sim/simulator.h"

namespace memwall {

// `run`'s plan of `graph` on `hw` for `budget`, beside the keep-all
// simulation: the header line and one row per figure.
std::string remat_plan_text(const Graph& graph, const Hardware& hw, const RematPlanner& planner,
                            const RematRun& run, const SimResult& keep_all, uint64_t budget);

// --json's object of the same (strategy as the user named it).
nlohmann::json remat_plan_json(const Graph& graph, const Hardware& hw, std::string_view strategy,
                               const RematRun& run, const SimResult& keep_all, uint64_t budget);

}  // namespace memwall
