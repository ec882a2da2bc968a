// Internal to the planner: one model-state configuration made concrete,
// fitting an activation planner into it (fit.cc), and the pieces of the
// configuration search (chunk_search.cc).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memwall/base/deadline.h"
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
  std::vector<HostReserve> host_reserved;  // StateConfig::as_deepspeed: DeepSpeed's host buffers

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
// sometimes turn into a faster plan than the spill. kCheckpoint runs the
// rematerialization planner PlannerOptions::checkpointing names.
enum class Activations {
  kKeepAll,
  kRemat,
  kCapuchinHost,
  kCapuchinSpill,
  kCapuchinNvme,
  kVdnn,
  kCheckpoint
};
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

// ---- The configuration search's pieces (chunk_search.cc) ---------------------

// A configuration, or why its rewrite does not apply to the graph.
struct Built {
  std::optional<ConfigWork> work;
  std::string why;
};
Built build(const Graph& graph, const StateConfig& config, int ranks);

// A configuration made concrete with its unconstrained time.
struct Work {
  ConfigWork work;
  Unconstrained bound;
};

// Note [Chunked optimizer states] in auto.cc: the all-NVMe configuration
// `all_nvme` with the largest host share of its optimizer states whose
// keep-all simulation still fits host memory, found by bisection (six
// simulations at most; the free memory of the all-NVMe run is only where
// it starts, since the host also stages what is read ahead and queues
// gradients). Null when the host has no room to speak of.
std::optional<Work> with_most_on_host(const Graph& graph, const ConfigWork& all_nvme,
                                      const Hardware& hw, const PlannerOptions& opts, int ahead,
                                      bool in_order, const Deadline& deadline,
                                      double device_share = 0);

// Note [Device chunk search] in chunk_search.cc: after the configuration
// search, a share of the parameters kept whole on the device for a plan
// whose optimizer steps run on the CPU. `best` is set when a plan faster
// than `best_time` is found.
struct DeviceChunkSearch {
  const Graph& graph;
  const Hardware& hw;
  const PlannerOptions& opts;
  uint64_t budget;
  const Deadline& deadline;
  double best_time;
  std::optional<Candidate> best;
  int fitted = 0;

  struct Base {
    std::optional<ConfigWork> work;  // the base at share 0 (all NVMe for an NVMe one)
    double most = 0;
    int ahead = 4;
  };
  // Whether a larger share could be faster.
  enum class Verdict { kMore, kLess };

  void run(const StateConfig& found);
  Base base_of(StateConfig c) const;
  // The base at this device share, with its unconstrained time.
  std::optional<Work> at_share(const Base& b, double share) const;
  // Fits the base at `fraction` of its most.
  Verdict fit_at(const Base& b, double fraction);
};

}  // namespace memwall::planner_detail
