#include "options.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string_view>
#include <utility>

#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/layout/csv.h"
#include "memwall/models/zoo.h"

namespace memwall::cli {
namespace {

// Zero or negative sizes are refused here: inside ModelOptions 0 means
// "the model's default", which a user typing 0 did not ask for.
int64_t positive(const std::optional<std::string>& value, const char* flag) {
  return value ? parse_count(*value, flag) : 0;
}

// The dtype the math of a precision runs in (mixed precision: the half type).
DType compute_dtype(Precision precision) {
  switch (precision) {
    case Precision::kBf16:
      return DType::kBF16;
    case Precision::kFp16:
      return DType::kF16;
    case Precision::kFp32:
      break;
  }
  return DType::kF32;
}

}  // namespace

int64_t parse_count(const std::string& text, const char* flag) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc::result_out_of_range) fail("{} {} is too large", flag, text);
  if (ec != std::errc() || ptr != end || text.empty()) {
    fail("{} must be a positive integer (got '{}')", flag, text);
  }
  if (value <= 0) fail("{} must be a positive integer (got {})", flag, value);
  return value;
}

int parse_gpus_per_node(const std::string& text) {
  const int64_t value = parse_count(text, "--gpus-per-node");
  if (value > kMaxGpusPerNode) {
    fail("--gpus-per-node must be at most {} (got {})", kMaxGpusPerNode, value);
  }
  return static_cast<int>(value);
}

uint64_t parse_bytes(const std::string& text, const char* flag, uint64_t reference) {
  return parse_size(text, flag, reference, text, "42949672960, 40GiB or 80%");
}

uint64_t parse_size(std::string_view text, const char* flag, uint64_t reference,
                    std::string_view shown, std::string_view examples) {
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"KiB", 0x1p10}, {"MiB", 0x1p20}, {"GiB", 0x1p30}, {"TiB", 0x1p40}, {"PiB", 0x1p50},
      {"EiB", 0x1p60}, {"KB", 1e3},     {"MB", 1e6},     {"GB", 1e9},     {"TB", 1e12},
      {"PB", 1e15},    {"EB", 1e18},    {"%", 0},        {"B", 1}};
  std::string_view number = text;
  double scale = 1;
  bool percent = false;
  for (const auto& [unit, factor] : kUnits) {
    if (number.size() > unit.size() && number.ends_with(unit)) {
      number.remove_suffix(unit.size());
      scale = factor;
      percent = unit == "%";
      break;
    }
  }
  while (!number.empty() && number.back() == ' ') number.remove_suffix(1);
  if (scale == 1 && !number.empty() &&
      number.find_first_not_of("0123456789") == std::string_view::npos) {
    uint64_t exact = 0;  // plain bytes: exact beyond 2^53 too
    const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), exact);
    if (ec == std::errc() && ptr == number.data() + number.size() && exact > 0 &&
        exact <= kMaxBytes) {
      return exact;
    }
  }
  double value = 0;
  const char* end = number.data() + number.size();
  auto [ptr, ec] = std::from_chars(number.data(), end, value);
  if (ec != std::errc() || ptr != end || number.empty() || !(value > 0) ||
      number.find_first_not_of("0123456789.") != std::string_view::npos) {
    fail("{} must be a positive size such as {} (got '{}')", flag, examples, shown);
  }
  const double bytes = percent ? value / 100 * static_cast<double>(reference) : value * scale;
  if (!(bytes < 0x1p62)) fail("{} {} is above the limit of 2^62 bytes", flag, shown);
  if (bytes < 1) fail("{} {} is less than one byte", flag, shown);
  return static_cast<uint64_t>(bytes);
}

double parse_lora_alpha(const std::string& text) {
  char* end = nullptr;
  const double alpha = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(alpha > 0) || !std::isfinite(alpha)) {
    fail("--lora-alpha must be a positive number (got '{}')", text);
  }
  return alpha;
}

void GraphSource::add_options(CLI::App& app, const std::string& default_model) {
  model = default_model;
  model_option = app.add_option("--model", model, "built-in model (see `memwall models`)")
                     ->capture_default_str();
  app.add_option("--graph", graph_file, "read a memwall.graph/1 JSON file instead of --model");
  app.add_option("--batch", batch, "batch size (default: the model's)");
  app.add_option("--seq", seq, "sequence length, transformers (default: the model's)");
  app.add_option("--image", image, "image side in pixels, CNNs (default: the model's)");
  dtype_option = app.add_option(
      "--dtype", dtype,
      "fp32, bf16/fp16 mixed precision, or nf4 (QLoRA base weights) (default: bf16, or fp16 on "
      "GPUs without bf16)");
  optimizer_option = app.add_option("--optimizer", optimizer, "sgd, momentum, adam or adamw")
                         ->capture_default_str();
  app.add_flag("--flash", flash, "fused flash attention (saves no s x s tensors)");
  app.add_flag("--forward-only", forward_only,
               "the forward pass alone, loss included (inference or evaluation): no backward, no "
               "optimizer step");
  app.add_option("--lora", lora_rank,
                 "LoRA adapters of rank R on the --lora-targets; the base weights are frozen");
  app.add_option("--lora-targets", lora_targets,
                 "comma-separated projections: q,k,v,o,gate,up,down, or all (default: q,v; with "
                 "--qlora: all)");
  app.add_option("--lora-alpha", lora_alpha,
                 "LoRA scaling numerator (default 8, peft's; with --qlora 16)");
  app.add_flag("--eager-kernels", eager_kernels,
               "transformers: RMSNorm and GPT-2's GELU as the plain-torch kernels Hugging Face's "
               "modules run in eager PyTorch, not one fused kernel each");
  app.add_flag("--qlora", qlora,
               "QLoRA: NF4 base weights (as --dtype nf4) with LoRA adapters (default r 64 on every "
               "projection, alpha 16)");
}

bool GraphSource::given() const {
  return !graph_file.empty() || (model_option != nullptr && model_option->count() > 0);
}

void apply_profile_kernels(const Hardware& hw, Graph& graph) {
  if (hw.kernel_seconds.empty()) return;
  if (apply_kernel_times(hw, graph) == 0) {
    note(
        fmt::format("the profile's {} measured kernels match none of graph \"{}\"'s ops (it was "
                    "calibrated with other graphs): its ops keep the roofline",
                    hw.kernel_seconds.size(), graph.name));
  }
}

std::string graph_text_for(const Hardware& hw, const Graph& graph) {
  if (hw.kernel_seconds.empty()) return graph_to_json_text(graph);
  Graph copy = graph;
  clear_kernel_times(hw, copy);
  return graph_to_json_text(copy);
}

Graph GraphSource::load(const Hardware& hw) const {
  if (!graph_file.empty()) {
    // A graph file fixes all of these; taking them silently would answer
    // for something else than the user asked.
    const bool zoo_options = batch || seq || image || flash || forward_only || lora_rank ||
                             lora_targets || lora_alpha || qlora || eager_kernels ||
                             (model_option && model_option->count() > 0) ||
                             (dtype_option && dtype_option->count() > 0) ||
                             (optimizer_option && optimizer_option->count() > 0);
    if (zoo_options) {
      fail(
          "--model, --batch, --seq, --image, --dtype, --optimizer, --flash, --forward-only, "
          "--eager-kernels and the LoRA options build a zoo model; they do not apply to --graph {}",
          graph_file);
    }
    Graph graph = read_graph_file(graph_file);
    apply_profile_kernels(hw, graph);
    if (const OpId op = first_op_not_computable(hw, graph); op != kNoOp) {
      const Op& o = graph.ops[op];
      fail("{}: op {} ({}) computes in {}, which {} cannot (it computes in {})", graph_file, op,
           o.name, to_string(op_compute_dtype(graph, o)), hw.name, float_dtypes_of(hw));
    }
    return graph;
  }
  const ModelOptions options = model_options(hw);
  try {
    Graph g = build_model(model, options);
    validate(g);  // the zoo's graphs are checked like any input
    return g;
  } catch (const Error& e) {
    // Sizes beyond 2^62 come from deep inside a builder: say which model.
    if (std::string_view(e.what()).starts_with("model ")) throw;
    fail("model {} at batch {}: {}", model,
         options.batch > 0 ? options.batch : find_model(model).default_batch, e.what());
  }
}

ModelOptions GraphSource::model_options(const Hardware& hw) const {
  if (!graph_file.empty()) fail("this needs a zoo model (--model), not --graph");
  ModelOptions opts;
  opts.batch = positive(batch, "--batch");
  opts.seq = positive(seq, "--seq");
  opts.image = positive(image, "--image");
  // nf4: the blocks' frozen weights in NF4, the math in the default
  // mixed precision (bf16, or fp16 below).
  const bool nf4 = qlora || dtype == "nf4";
  opts.precision = dtype == "nf4" ? Precision::kBf16 : parse_precision(dtype);
  if (nf4) opts.base_weights = WeightFormat::kNf4;
  if (lora_rank) {
    opts.lora.rank = parse_count(*lora_rank, "--lora");
  } else if (qlora) {
    opts.lora.rank = 64;
  } else if (lora_targets || lora_alpha) {
    fail("--lora-targets and --lora-alpha need --lora R (or --qlora)");
  }
  if (qlora) {
    opts.lora.targets = lora_target_names();
    opts.lora.alpha = 16;
  }
  if (lora_targets) opts.lora.targets = parse_lora_targets(*lora_targets);
  if (lora_alpha) opts.lora.alpha = parse_lora_alpha(*lora_alpha);
  opts.optimizer = parse_optimizer(optimizer);
  opts.flash = flash;
  opts.eager_kernels = eager_kernels;
  opts.forward_only = forward_only;
  if (forward_only && optimizer_option != nullptr && optimizer_option->count() > 0) {
    fail("--optimizer {} does not apply to --forward-only, which has no optimizer step", optimizer);
  }
  const DType math = compute_dtype(opts.precision);
  if (!computes_in(hw, math)) {
    const bool chosen = dtype_option != nullptr && dtype_option->count() > 0 && dtype != "nf4";
    if (chosen || !computes_in(hw, DType::kF16)) {
      fail("--dtype {}: {} cannot compute in {} (it computes in {})", dtype, hw.name,
           to_string(math), float_dtypes_of(hw));
    }
    // The default is bf16; on a GPU without it, mixed precision is fp16.
    opts.precision = Precision::kFp16;
    note(fmt::format("{} has no bf16 arithmetic: using fp16 mixed precision (--dtype to choose)",
                     hw.name));
  }
  return opts;
}

void GpuSource::add_options(CLI::App& app, const std::string& default_gpu) {
  gpu = default_gpu;
  gpu_option = app.add_option("--gpu", gpu, "built-in GPU profile (see `memwall gpus`)")
                   ->capture_default_str();
  app.add_option("--gpu-file", gpu_file,
                 "hardware profile JSON file instead of --gpu: one profile, or an array as "
                 "`memwall gpus --json` prints (its only profile, or the one --gpu names)");
}

bool GpuSource::given() const {
  return !gpu_file.empty() || (gpu_option != nullptr && gpu_option->count() > 0);
}

Hardware GpuSource::load() const {
  if (!gpu_file.empty()) {
    // With a file, --gpu picks a profile of an array; without it, the file
    // must hold one (the default --gpu would pick silently).
    const bool named = gpu_option != nullptr && gpu_option->count() > 0;
    return read_hardware_file(gpu_file, named ? std::string_view(gpu) : std::string_view());
  }
  return find_gpu(gpu);
}

Hardware GpuSource::load_for_plan(const Plan& plan) const {
  if (given()) {
    Hardware hw = load();
    if (hw.name != plan.hardware) {
      note(fmt::format("the plan was made for {}; judging it on {} as asked", plan.hardware,
                       hw.name));
    }
    return hw;
  }
  for (const Hardware& hw : builtin_gpus()) {
    if (hw.name == plan.hardware) return hw;
  }
  fail(
      "the plan was made for hardware \"{}\", which is not built in: give its profile with "
      "--gpu-file (or --gpu NAME to judge it elsewhere)",
      plan.hardware);
}

void note(const std::string& text) { std::cerr << "memwall: note: " << text << "\n"; }

std::string find_data_dir(const std::string& given, const std::string& sub) {
  namespace fs = std::filesystem;
  if (!given.empty()) {
    if (!fs::is_directory(given)) fail("--data {}: no such directory", given);
    return given;
  }
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("MEMWALL_DATA"))
    candidates.push_back(std::string(env) + "/" + sub);
  candidates.push_back("../shared/data/" + sub);
  candidates.push_back(std::string(MEMWALL_SOURCE_DIR) + "/../shared/data/" + sub);
  for (const std::string& dir : candidates) {
    if (fs::is_directory(dir)) return dir;
  }
  return "";
}

std::vector<std::string> csv_files(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".csv") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

LayoutCsv read_lifetimes_csv(const std::string& path, std::string_view purpose) {
  LayoutCsv csv = read_layout_csv(path);
  if (csv.problem.buffers.empty()) {
    fail("{}: no buffers (a header and no rows): nothing to {}", path, purpose);
  }
  return csv;
}

double checked_time_limit(double seconds) {
  if (!(seconds > 0) || seconds > 86400) {
    fail("--time-limit must be a number of seconds in (0, 86400] (got {})", seconds);
  }
  return seconds;
}

void add_export_options(CLI::App& app, SimExports& exports) {
  app.add_option("--trace", exports.trace_file,
                 "write a Chrome trace (Perfetto, chrome://tracing)");
  app.add_option("--svg", exports.svg_file, "write an SVG plot of device memory over time");
}

}  // namespace memwall::cli
