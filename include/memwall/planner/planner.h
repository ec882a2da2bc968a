// The automatic planner, `memwall plan`'s default (docs/planner.md): for one
// training iteration, a hardware profile and a device budget, it chooses
// where model states live (device, host, NVMe; ZeRO stage across ranks) and
// what happens to each activation (kept, swapped to host or NVMe,
// recomputed), minimizing the simulated iteration time within the budget.
// Every figure comes from the simulator.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/plan/plan.h"
#include "memwall/sim/simulator.h"

namespace memwall {

// Device memory the framework holds outside any plan (CUDA context, cuBLAS
// and cuDNN workspaces, the allocator's own slack): the default budget is
// the device's memory less this (Note [Framework reserve] in bounds.cc).
uint64_t framework_reserve(const Hardware& hardware);
uint64_t default_budget(const Hardware& hardware);

struct PlannerOptions {
  uint64_t budget = 0;            // device bytes; 0: default_budget
  int ranks = 1;                  // data-parallel ranks (ZeRO shards across them)
  std::optional<int> zero_stage;  // only this stage (default: every stage, with ranks > 1)
  uint64_t host_bytes = 0;        // host memory; 0: the profile's
  uint64_t nvme_bytes = 0;        // NVMe capacity; 0: unlimited
  double time_limit = 10;         // seconds, per activation planner run
};

// Where the model states live.
struct StateConfig {
  int stage = 0;                   // ZeRO stage (0: replicated)
  Tier optimizer = Tier::kDevice;  // optimizer states and the step
  Tier params = Tier::kDevice;
  std::string name() const;  // e.g. "ZeRO-2, optimizer on host"
};

// One way to run the iteration, judged by the simulator.
struct Candidate {
  std::string technique;    // "remat", "vdnn", "capuchin", "zero-offload", "zero-infinity", "auto"
  std::string activations;  // the activation planner: keep-all, remat:memwall, capuchin, ...
  StateConfig states;
  bool fits = false;
  std::string why;  // when it does not fit: the first resource that runs out, and by how much
  Graph graph;      // what the plan runs (the rank's graph, rewritten for offload)
  Plan plan;
  SimResult sim;  // within the budget when it fits
  double solve_seconds = 0;
};

struct LowerBound {
  double seconds = 0;   // max(compute, unavoidable transfer)
  double compute = 0;   // device compute of the iteration, nothing recomputed
  double transfer = 0;  // model-state bytes that cannot stay on the device, moved once
  std::string why;      // which term binds
};

struct AutoPlan {
  Candidate best;                  // technique "auto"
  std::vector<Candidate> singles;  // each single technique on the same work
  LowerBound bound;
  uint64_t budget = 0;
  Hardware hardware;  // with the host size the planner used
  size_t configs_tried = 0;
  double solve_seconds = 0;
};

// Throws Error when nothing fits, naming the resource that runs out first
// in the most frugal configuration and by how much (device, host, NVMe), or
// for bad options.
AutoPlan plan_auto(const Graph& graph, const Hardware& hardware, const PlannerOptions& options);

// The single techniques alone (the side-by-side table): best remat-only,
// vDNN, Capuchin, ZeRO-Offload, ZeRO-Infinity. Never throws for a technique
// that does not fit: its Candidate says why.
std::vector<Candidate> single_techniques(const Graph& graph, const Hardware& hardware,
                                         const PlannerOptions& options);

// One of them by name ("remat", "vdnn", "capuchin", "zero-offload",
// "zero-infinity"); throws Error for an unknown name.
Candidate plan_single_technique(const Graph& graph, const Hardware& hardware,
                                const PlannerOptions& options, std::string_view technique);
std::vector<std::string_view> single_technique_names();

// See Note [Lower bound] in bounds.cc.
LowerBound iteration_lower_bound(const Graph& graph, const Hardware& hardware,
                                 const PlannerOptions& options);

// ---- Capacity searches (capacity.cc) -----------------------------------------
struct MaxBatch {
  int64_t batch = 0;          // the largest batch that plans
  AutoPlan plan;              // its plan
  int64_t first_failing = 0;  // the smallest batch found not to plan (0: none up to the limit)
  std::string why;            // why first_failing does not plan
  int plans_tried = 0;
};
// The largest batch of zoo model `model` (other options from `base`) for
// which plan_auto finds a plan, up to `limit`: doubling, then bisection
// (plans get harder with the batch). Throws Error when batch 1 does not plan.
MaxBatch max_batch(std::string_view model, const ModelOptions& base, const Hardware& hardware,
                   const PlannerOptions& options, int64_t limit = 65536);

struct MaxModel {
  std::string model;  // the largest of the family that plans
  AutoPlan plan;
  // Every member tried, largest first, with "plans" or why not.
  std::vector<std::pair<std::string, std::string>> tried;
};
// The largest zoo model whose name starts with `family` (e.g. "llama2",
// "gpt2", "resnet") that plans at all, trying members from the largest
// published parameter count down. Throws Error for a family with no member
// or none that plans.
MaxModel max_model(std::string_view family, const ModelOptions& base, const Hardware& hardware,
                   const PlannerOptions& options);

}  // namespace memwall
