// Option groups shared by the verbs: where the graph comes from and which
// hardware profile to use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/layout/csv.h"
#include "memwall/models/zoo.h"
#include "memwall/plan/plan.h"
#include "memwall/report/exports.h"

namespace memwall::cli {

// --model NAME [--batch --seq --image --dtype --optimizer --flash --forward-only]
// or --graph FILE.
struct GraphSource {
  std::string model;
  std::string graph_file;
  // Kept as text and parsed by parse_count: CLI11 saturates overflowing
  // integers silently, which would turn a typo into a huge batch.
  std::optional<std::string> batch, seq, image;
  std::string dtype = "bf16";
  std::string optimizer = "adam";
  bool flash = false;
  bool forward_only = false;
  // LoRA / QLoRA (zoo transformers): --lora R [--lora-targets] [--lora-alpha]
  // and --qlora (NF4 base weights; r 64, alpha 16 on every projection unless
  // given, as the QLoRA paper trains).
  std::optional<std::string> lora_rank, lora_targets, lora_alpha;
  bool qlora = false;
  bool eager_kernels = false;
  // The options as registered, to tell a default from a value the user gave.
  CLI::Option* model_option = nullptr;
  CLI::Option* dtype_option = nullptr;
  CLI::Option* optimizer_option = nullptr;

  void add_options(CLI::App& app, const std::string& default_model);
  // Whether the user named a source (--model or --graph).
  bool given() const;
  // Builds or reads the graph for `hw`; throws Error on bad input: zoo
  // options with --graph, a dtype `hw` cannot compute in (see
  // model_options), a graph file computing in one.
  Graph load(const Hardware& hw) const;
  // The zoo options of --model (batch, seq, ... as given) for `hw`: without
  // --dtype, bf16, or fp16 on a GPU without bf16 arithmetic (with a note on
  // stderr); throws Error on bad values, on a --dtype `hw` cannot compute
  // in, and when the graph comes from --graph.
  ModelOptions model_options(const Hardware& hw) const;
};

// --lora-alpha: a positive finite number; throws Error otherwise.
double parse_lora_alpha(const std::string& text);

// A positive integer flag value; throws Error naming the flag otherwise.
int64_t parse_count(const std::string& text, const char* flag);

// A memory size: plain bytes ("42949672960"), a decimal number with a unit
// (KiB, MiB, GiB, TiB, PiB, EiB; KB, MB, GB, TB, PB, EB in powers of ten), or a percentage of
// `reference` bytes ("80%"). Throws Error naming the flag for anything else,
// for zero, and for sizes above 2^62 bytes.
uint64_t parse_bytes(const std::string& text, const char* flag, uint64_t reference);
// parse_bytes of `text`, its messages showing `shown` and the forms
// `examples` names (--budget's: budget.h).
uint64_t parse_size(std::string_view text, const char* flag, uint64_t reference,
                    std::string_view shown, std::string_view examples);

// A --time-limit in seconds, within (0, 86400]; throws Error otherwise.
double checked_time_limit(double seconds);

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

// The profile's measured kernels for `graph`'s ops (Note [Measured kernels]
// in hw/hardware.h), with a note on stderr when it has some and none match.
void apply_profile_kernels(const Hardware& hw, Graph& graph);
// The graph as a file holds it: without the profile's measured kernels.
std::string graph_text_for(const Hardware& hw, const Graph& graph);

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
