// `memwall run`'s options (run.cc), checked before any work: a trace
// takes seconds to minutes, so a bad option fails at once.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/importers/kept_values.h"
#include "memwall/importers/torch_trace.h"
#include "memwall/plan/plan.h"
#include "options.h"
#include "traced_model.h"

namespace memwall::cli {

struct RunArgs {
  std::string graph_file, plan_file;
  TracedModel model;
  std::string builtin;
  GpuSource gpu;
  std::string budget;
  std::optional<std::string> steps, seed;
  bool check_eager = false;
  bool json = false;
  std::optional<std::string> policy;  // default stitching
  std::optional<std::string> device;  // default emulated
  std::string python;
  std::string values;  // --keep-values
  std::string trace;   // --trace
  std::vector<std::string> nvme_dirs;
  std::string nvme_faults;
  std::optional<std::string> ranks;  // the one-go path: auto plans for these ranks
  std::optional<int> zero_stage;
};

// What the options decide before the trace.
struct RunSetup {
  int ranks = 1;  // --ranks: auto plans for them
  std::optional<int> steps_given;
  std::optional<int64_t> seed_given;
  std::string policy;
  std::string device;  // the executor's: emulated or cuda (RunOptions::device)
  Graph graph;  // --graph's; else the trace's, once traced
  Plan plan;    // --plan's; else auto's
  Hardware hw;
  importers::TorchTraceRequest request;  // the model whose values the run takes
  importers::KeptValues kept;
};

// The options that hold whatever the source: one source, --ranks,
// --zero-stage, --steps, --seed, --nvme-faults, --policy, --nvme-dir.
void parse_options(const RunArgs& args, RunSetup& s);
// --graph G --plan P: both read and held to the run before the trace.
void given_plan(const RunArgs& args, RunSetup& s);
// A model to trace: the profile that predicts it, and its request.
void model_to_trace(const RunArgs& args, RunSetup& s);

}  // namespace memwall::cli
