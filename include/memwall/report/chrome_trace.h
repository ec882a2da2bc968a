// Chrome trace event JSON of a simulated plan: opens in Perfetto
// (ui.perfetto.dev) and chrome://tracing.
#pragma once

#include <string>
#include <string_view>

#include "memwall/graph/types.h"
#include "memwall/plan/plan.h"
#include "memwall/sim/simulator.h"

namespace memwall {

// One track per resource (its busy spans, named after the step and its op or
// buffer), counter tracks for the bytes on each tier. Needs a result
// simulated with SimOptions::record_timeline.
// `process` names the trace's process: what made the timeline ("memwall
// plan" for the simulator, "memwall run" for an executed plan).
std::string chrome_trace_json(const Graph& graph, const Plan& plan, const SimResult& result,
                              std::string_view process = "memwall plan");

}  // namespace memwall
