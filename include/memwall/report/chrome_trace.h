// Chrome trace event JSON of a simulated plan: opens in Perfetto
// (ui.perfetto.dev) and chrome://tracing.
#pragma once

#include <string>

#include "memwall/graph/types.h"
#include "memwall/plan/plan.h"
#include "memwall/sim/simulator.h"

namespace memwall {

// One track per resource (its busy spans, named after the step and its op or
// buffer), counter tracks for the bytes on each tier. Needs a result
// simulated with SimOptions::record_timeline.
std::string chrome_trace_json(const Graph& graph, const Plan& plan, const SimResult& result);

}  // namespace memwall
