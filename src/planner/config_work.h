// Internal to the planner: one model-state configuration made concrete, and
// fitting an activation planner into it (fit.cc).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memwall/planner/planner.h"
#include "memwall/sim/simulator.h"
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

  // The configuration with every activation kept (plan.budget = kMaxBytes),
  // simulated without a device limit. unconstrained_time, the host memory
  // left for swaps and the keep-all fit all read it, so it is simulated once
  // per configuration; `hardware` must be the same on every call.
  struct KeepAll {
    Plan plan;
    SimResult sim;
  };
  const KeepAll& keep_all(const Hardware& hardware) const;

 private:
  mutable std::optional<KeepAll> keep_all_;
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
  Shortfall short_of;  // with why
};
Unconstrained unconstrained_time(const ConfigWork& work, const Hardware& hardware,
                                 const PlannerOptions& options);

// The host size the options ask for.
Hardware with_host(const Hardware& hardware, const PlannerOptions& options);

// Why a simulation of a rank of `graph` does not fit the node outside the
// device budget, as one line and as numbers; why empty when it fits.
struct Misfit {
  std::string why;
  Shortfall short_of;
};
// The simulator's verdict when it rejects the plan (host memory over the
// rank's share of the node's: Note [Ranks on a node] in hw/ranks.cc), or
// NVMe use over the node's --nvme capacity (the rank's peak times the
// ranks sharing the node).
Misfit node_misfit(const SimResult& sim, const Graph& graph, const Hardware& hardware,
                   const PlannerOptions& options);

// A way to run the iteration that found no plan (Note [What ran out] in
// no_plan.cc).
struct Failure {
  StateConfig config;
  std::string activations;
  std::string why;
  Shortfall short_of;
};
// The failure of `c` (one that does not fit).
Failure failure_of(const Candidate& c);
// Throws Error: `head` and the configurations `skipped`, then the closest
// of `failures` and what ran out there; the next closest configurations
// become its notes.
[[noreturn]] void fail_no_plan(const std::string& head, const std::vector<SkippedConfig>& skipped,
                               std::vector<Failure> failures);

}  // namespace memwall::planner_detail
