// `memwall plan`'s options, shared by its two paths: the automatic planner
// and single techniques (plan_auto.cc), and the rematerialization planners
// alone (plan.cc).
#pragma once

#include <optional>
#include <string>

#include "memwall/remat/remat.h"
#include "memwall/report/exports.h"
#include "options.h"

namespace memwall::cli {

struct PlanArgs {
  GraphSource source;
  GpuSource gpu;
  std::string budget;
  std::string strategy = "auto";
  double time_limit = RematOptions{}.time_limit;
  std::string out;
  std::string out_graph;
  SimExports exports;
  bool json = false;
  bool no_layout = false;  // --no-layout: --out without offsets
  // The automatic planner's search space and capacity searches.
  std::optional<std::string> ranks;
  std::optional<std::string> gpus_per_node;
  std::optional<int> zero_stage;
  std::string checkpointing;  // --checkpointing: a remat planner under a single technique
  std::string host_memory;
  std::string nvme;
  bool max_batch = false;
  bool largest = false;               // --max-batch: the largest batch, however slow
  std::optional<double> search_time;  // seconds for --max-batch / --max-model
  std::string max_model;
  bool model_given = false;  // --model on the command line (not its default)
  // Pipeline parallelism (plan_pipeline.cc).
  std::optional<std::string> pipeline_parallel;
  std::optional<std::string> micro_batches;
  std::optional<std::string> chunks_per_device;
  std::string schedule;
  std::string partition;
  std::string torchrun;  // --torchrun DIR: the plan as PyTorch runs it (torch_layout.h)
  // The layout search (--gpus N --global-batch B).
  std::optional<std::string> gpus;
  std::optional<std::string> nodes;  // --nodes M: M x gpus_per_node GPUs for the layout search
  std::optional<std::string> global_batch;
};

// The node's profile: --gpu or --gpu-file, with --gpus-per-node.
Hardware load_node(const PlanArgs& args);

// One line (exit code 2) for an option this combination would ignore.
void refuse_ignored_options(const PlanArgs& args);

// The automatic planner or a single technique (--strategy auto, vdnn,
// capuchin, zero-offload, zero-infinity), with --max-batch / --max-model.
int run_auto_plan(const PlanArgs& args);

// Whether a pipeline option was given, and the pipeline-parallel plan
// (--pipeline-parallel N: plan_pipeline.cc).
bool is_pipeline(const PlanArgs& args);
int run_pipeline_plan(const PlanArgs& args);
// The layout search over data, tensor and pipeline parallelism (--gpus N).
int run_layout_search(const PlanArgs& args);

}  // namespace memwall::cli
