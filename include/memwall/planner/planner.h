// The automatic planner, `memwall plan`'s default (docs/planner.md): for one
// training iteration, a hardware profile and a device budget, it chooses
// where model states live (device, host, NVMe; ZeRO stage across ranks) and
// what happens to each activation (kept, swapped to host or NVMe,
// recomputed), minimizing the simulated iteration time within the budget.
// Every figure comes from the simulator.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/plan/plan.h"
#include "memwall/sim/simulator.h"
#include "memwall/sim/throughput.h"

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
  bool no_nvme = false;           // no NVMe at all: nothing is placed there (--nvme none)
  // Wall-clock seconds for the whole search (plan_auto, single_techniques,
  // plan_single_technique): it returns within them plus a small margin
  // (Note [Time limits are wall time], docs/planner.md).
  double time_limit = 10;
  // Note [Checkpointing under a technique] (auto.cc): the rematerialization
  // planner (remat.h, e.g. "per-layer", "selective") that the single
  // techniques managing model states (zero, zero-offload, zero-infinity,
  // patrickstar, paged) run their activations with, as the published
  // systems ran them; empty: each technique's own (keep-all for zero,
  // zero-offload and zero-infinity, memwall's for patrickstar and paged).
  std::string checkpointing;
};

// Where the model states live.
struct StateConfig {
  int stage = 0;                   // ZeRO stage (0: replicated)
  Tier optimizer = Tier::kDevice;  // optimizer states and the step
  Tier params = Tier::kDevice;
  // With the optimizer on NVMe: the share of its states' bytes kept on the
  // host instead, in chunks spread over the step order (Note [Optimizer
  // chunks] in swap/offload.h); 0: all on NVMe.
  double optimizer_host_share = 0;
  // With the optimizer on the host or NVMe: the share of its states' bytes
  // kept on the device with their parameters and steps instead, in chunks
  // first in step order (Note [Device chunks] in swap/offload.cc).
  double optimizer_device_share = 0;
  // States on NVMe are read this many CPU steps ahead (OffloadOptions).
  int nvme_read_ahead = 1;
  // The host's chunks are the first in step order, not spread (PatrickStar).
  bool chunks_in_order = false;
  // With the optimizer on the host: its states are paged in for the
  // device's own step instead of stepped on the CPU (bitsandbytes' paged
  // optimizers, Note [Paged optimizer] in swap/offload.cc).
  bool paged = false;
  // CPU steps after the end of backward, as DeepSpeed runs them (the
  // published ZeRO-Offload, ZeRO-Infinity and PatrickStar baselines; Note
  // [Steps after backward] in swap/offload.cc).
  bool steps_after_backward = false;
  // The published ZeRO-Offload and ZeRO-Infinity baselines as DeepSpeed
  // runs them: its host buffers reserved in the plan, and gradients whose
  // states live on NVMe waiting there for their step (Note [Host buffers of
  // the published systems] in swap/deepspeed_buffers.cc).
  bool as_deepspeed = false;
  std::string name() const;  // e.g. "ZeRO-2, optimizer on host"
};

// What ran out where a way to run the iteration does not fit (Note [What
// ran out] in src/planner/no_plan.cc): in which memory, the bytes the
// closest try needed there (device: the lowest peak reached or proved
// necessary; host: a rank's peak; NVMe: the node's) and the bytes there
// are (the budget, the rank's share of the host, --nvme). limit 0: not
// known (a time limit, a planner that cannot plan the graph).
struct Shortfall {
  Tier memory = Tier::kDevice;
  uint64_t need = 0;
  uint64_t limit = 0;
  double ratio() const;  // need / limit; infinity when not known
};

// One way to run the iteration, judged by the simulator.
struct Candidate {
  std::string technique;    // "remat", "vdnn", "capuchin", "zero-offload", "zero-infinity", "auto"
  std::string activations;  // the activation planner: keep-all, remat:memwall, capuchin, ...
  StateConfig states;
  bool fits = false;
  std::string why;     // when it does not fit: the first resource that runs out, and by how much
  Shortfall short_of;  // when it does not fit: the same as numbers
  Graph graph;         // what the plan runs (the rank's graph, rewritten for offload)
  Plan plan;
  SimResult sim;  // within the budget when it fits
  double solve_seconds = 0;
};

// Note [Lower bound] in bounds.cc: each term is a time no plan beats.
struct LowerBound {
  double seconds = 0;     // the largest term
  double compute = 0;     // device compute of the iteration, nothing recomputed
  double transfer = 0;    // model-state bytes that cannot stay on the device, moved once
  double forward = 0;     // device compute of the forward pass: before any gradient exists
  double cpu = 0;         // forward + the CPU steps of the states the device cannot hold
  double nvme_write = 0;  // forward + writing back the states only NVMe can hold
  std::string why;        // which term binds
};

// A configuration the search could not build for this graph (its ZeRO or
// offload rewrite does not apply, e.g. a multi-tensor optimizer step: Note
// [Traced optimizer steps] in src/swap/optimizer_steps.cc).
struct SkippedConfig {
  StateConfig config;
  std::string why;
};

struct AutoPlan {
  Candidate best;                  // technique "auto"
  std::vector<Candidate> singles;  // each single technique on the same work
  LowerBound bound;
  uint64_t budget = 0;
  Hardware hardware;  // with the host size the planner used
  size_t configs_tried = 0;
  std::vector<SkippedConfig> skipped;  // in search order
  double solve_seconds = 0;
};

// Throws Error when nothing fits, naming the configuration that came
// closest and what ran out there and by how much (device memory at which
// op, host, NVMe), with the next closest as the Error's notes (Note [What
// ran out] in no_plan.cc), or for bad options. Configurations whose
// rewrite does not apply to the graph are skipped (AutoPlan::skipped); the
// plan comes from the others.
AutoPlan plan_auto(const Graph& graph, const Hardware& hardware, const PlannerOptions& options);

// The single techniques alone (the side-by-side table): best remat-only,
// vDNN, Capuchin, ZeRO-Offload, ZeRO-Infinity. Never throws for a technique
// that does not fit or whose configuration does not apply to the graph:
// its Candidate says why.
std::vector<Candidate> single_techniques(const Graph& graph, const Hardware& hardware,
                                         const PlannerOptions& options);

// One of them by name ("remat", "vdnn", "capuchin", "zero-offload",
// "zero-infinity", ...), or "zero" (DeepSpeed's ZeRO and PyTorch's FSDP
// without offload: every state on the device, sharded by the stage, which
// is not in the table since auto's own search covers it); throws Error for
// an unknown name.
Candidate plan_single_technique(const Graph& graph, const Hardware& hardware,
                                const PlannerOptions& options, std::string_view technique);
std::vector<std::string_view> single_technique_names();

// See Note [Lower bound] in bounds.cc.
LowerBound iteration_lower_bound(const Graph& graph, const Hardware& hardware,
                                 const PlannerOptions& options);

// ---- Capacity searches (capacity.cc) -----------------------------------------
// One plan_auto run of a capacity search, reported as it ends.
struct CapacityTry {
  std::string model;
  int64_t batch = 0;
  bool plans = false;
  double iteration_time = 0;  // when it plans
  double samples_per_s = 0;   // when it plans: batch / iteration time, per rank
  std::string why;            // when it does not
  double seconds = 0;         // planning time
};

struct CapacityOptions {
  // --max-batch: the largest batch that plans however slow it is, instead
  // of the batch with the highest throughput (Note [Batch search]).
  bool largest = false;
  // Seconds for the whole search, checked before each plan but the first (a
  // plan started runs to its end); when they run out the search returns its
  // best so far.
  double time_limit = 300;
  int64_t batch_limit = 65536;
  std::function<void(const CapacityTry&)> progress;  // after each plan, when set
};

struct MaxBatch {
  int64_t batch = 0;               // the batch chosen
  AutoPlan plan;                   // its plan
  int64_t first_failing = 0;       // the smallest batch tried that does not plan (0: none)
  std::string why;                 // why first_failing does not plan
  std::vector<CapacityTry> tried;  // every batch planned, in order
  bool cut_short = false;          // the time limit ended the search
  std::string stopped;             // one line: why the search ended where it did
  double seconds = 0;
};
// The batch of zoo model `model` (other options from `base`) with the
// highest throughput among those for which plan_auto finds a plan, or with
// options.largest the largest that plans, up to options.batch_limit (Note
// [Batch search] in capacity.cc). Throws Error when batch 1 does not plan.
MaxBatch max_batch(std::string_view model, const ModelOptions& base, const Hardware& hardware,
                   const PlannerOptions& options, const CapacityOptions& capacity);

struct MaxModel {
  std::string model;  // the largest of the family that plans
  AutoPlan plan;
  std::vector<CapacityTry> tried;  // every member tried, largest first
  double seconds = 0;
};
// The largest zoo model whose name starts with `family` (e.g. "llama2",
// "gpt2", "resnet") that plans at all, trying members from the largest
// published parameter count down. Throws Error for a family with no member,
// none that plans, or a time limit that runs out before one plans.
MaxModel max_model(std::string_view family, const ModelOptions& base, const Hardware& hardware,
                   const PlannerOptions& options, const CapacityOptions& capacity);

}  // namespace memwall
