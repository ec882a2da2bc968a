// Option groups shared by the verbs: where the graph comes from and which
// hardware profile to use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "memwall/base/parse_values.h"
#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/layout/csv.h"
#include "memwall/models/zoo.h"
#include "memwall/plan/plan.h"
#include "memwall/planner/model_source.h"
#include "memwall/report/exports.h"

namespace memwall::cli {

// --model NAME [--batch --seq --image --dtype --optimizer --flash --forward-only
// --lora ... --qlora --eager-kernels --tensor-parallel --sequence-parallel] or --graph FILE: the options bound to
// a ModelSource (memwall/planner/model_source.h), which gives the graph.
struct GraphSource : ModelSource {
  // The options as registered, to tell a default from a value the user gave.
  CLI::Option* model_option = nullptr;
  CLI::Option* dtype_option = nullptr;
  CLI::Option* optimizer_option = nullptr;

  void add_options(CLI::App& app, const std::string& default_model);
  // Whether the user named a source (--model or --graph).
  bool given() const;
  // load_model_graph and zoo_model_options with what the user gave, their
  // notes on stderr.
  Graph load(const Hardware& hw) const;
  ModelOptions model_options(const Hardware& hw) const;

 private:
  ModelSource as_given() const;
};

// --trace FILE and --svg FILE (memwall/report/exports.h).
void add_export_options(CLI::App& app, SimExports& exports);

// --gpus-per-node N: a positive integer up to kMaxGpusPerNode; throws Error
// naming the flag otherwise.
int parse_gpus_per_node(const std::string& text);

// --gpu NAME or --gpu-file FILE (not both).
struct GpuSource {
  std::string gpu;
  std::string gpu_file;
  CLI::Option* gpu_option = nullptr;

  void add_options(CLI::App& app, const std::string& default_gpu);
  // Whether the user named the hardware (--gpu or --gpu-file).
  bool given() const;
  Hardware load() const;
  // The hardware to judge `plan` on: the profile the plan was made for,
  // unless the user names another (then a note on stderr says so). Throws
  // Error when the plan's hardware is not built in and no --gpu-file names
  // it.
  Hardware load_for_plan(const Plan& plan) const;
};

// apply_profile_kernels (memwall/planner/model_source.h), its note on stderr.
void apply_profile_kernels(const Hardware& hw, Graph& graph);

// "memwall: note: ..." on stderr: something the user should know that does
// not change the exit code.
void note(const std::string& text);

// A directory of ../shared/data: `given` (--data) when set, which must
// exist; else the first of $MEMWALL_DATA/<sub>, ../shared/data/<sub> and the
// same next to the source tree (the data lives beside the checkout); "" when
// none exists.
std::string find_data_dir(const std::string& given, const std::string& sub);

// The .csv files of `dir`, sorted by path.
std::vector<std::string> csv_files(const std::string& dir);

// A lifetimes CSV (read_layout_csv) with at least one buffer: one without
// rows is an Error naming the file and that there is nothing to `purpose`
// (every verb's figures are ratios to its live bytes, which would be 0).
LayoutCsv read_lifetimes_csv(const std::string& path, std::string_view purpose);

}  // namespace memwall::cli
