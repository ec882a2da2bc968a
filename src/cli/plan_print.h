// What `memwall plan --strategy auto` (and the single techniques, and the
// capacity searches) prints: the summary table, the side-by-side table of
// single techniques and --json (plan_auto.cc parses and plans).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/planner/planner.h"
#include "plan_args.h"

namespace memwall::cli {

// What plan_auto.cc's write_outputs wrote: rows for the terminal, and the
// plan's layout for --json (null without --out or with --no-layout).
struct Written {
  std::vector<std::string> rows;
  nlohmann::json layout;
};

// The summary of `a`'s plan of `graph` (the work as given) on `hw` with
// `ranks` ranks, and the table of single techniques.
void print_plan(const PlanArgs& args, const Graph& graph, const AutoPlan& a, const Hardware& hw,
                int ranks, const Written& written);
nlohmann::json plan_json(const Graph& graph, const AutoPlan& a, const Hardware& hw, int ranks);

// --max-model and --max-batch: what the search tried, then print_plan (or
// --json). Return the exit code.
int print_max_model(const PlanArgs& args, const Graph& graph, const MaxModel& m, const Hardware& hw,
                    int ranks, const Written& written);
int print_max_batch(const PlanArgs& args, const Graph& graph, const MaxBatch& b, const Hardware& hw,
                    int ranks, const Written& written);

// One stderr line per plan a capacity search tries (stdout stays the result).
void report_try(const CapacityTry& t);
nlohmann::json tried_json(const std::vector<CapacityTry>& tried);

}  // namespace memwall::cli
