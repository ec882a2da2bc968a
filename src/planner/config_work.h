// Internal to the planner: one model-state configuration made concrete, and
// fitting an activation planner into it (fit.cc).
#pragma once

#include <optional>
#include <string_view>

#include "memwall/planner/planner.h"
#include "memwall/swap/offload.h"

namespace memwall::planner_detail {

struct ConfigWork {
  StateConfig config;
  Graph graph;  // the graph plans run on
  Graph view;   // what activation planners plan against (planning_view)
  std::optional<OffloadGraph> offload;
  OffloadOptions offload_options;

  // An activation plan of `view` with the configuration's model-state moves.
  Plan finish(const Plan& activation_plan) const;
};

ConfigWork make_config(const Graph& graph, const StateConfig& config, int ranks);

// How activations are handled.
// kCapuchinHost swaps to the host only (Capuchin as published);
// kCapuchinSpill swaps to the host while the memory the model states leave
// there allows, and to NVMe beyond (Note [Host, then NVMe] in capuchin.cc).
// kCapuchinNvme swaps everything to NVMe, which Capuchin's greedy choices
// sometimes turn into a faster plan than the spill.
enum class Activations { kKeepAll, kRemat, kCapuchinHost, kCapuchinSpill, kCapuchinNvme, kVdnn };
std::string_view to_string(Activations activations);

// The configuration's plan with `activations` within `budget`: the
// activation planner plans `view` for a budget lowered until the finished
// plan fits (Note [Fitting activations] in fit.cc). `hardware` carries the
// host size in use.
Candidate fit(const ConfigWork& work, Activations activations, const Hardware& hardware,
              uint64_t budget, const PlannerOptions& options);

// The simulated time of the configuration with every activation kept and no
// device limit: no plan of the configuration is faster (activation planners
// only add work). Infinity, and why, when even that is invalid (host or
// NVMe full).
struct Unconstrained {
  double seconds = 0;
  std::string why;
};
Unconstrained unconstrained_time(const ConfigWork& work, const Hardware& hardware,
                                 const PlannerOptions& options);

// The host size the options ask for.
Hardware with_host(const Hardware& hardware, const PlannerOptions& options);

}  // namespace memwall::planner_detail
