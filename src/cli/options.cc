#include "options.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string_view>

#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/layout/csv.h"
#include "memwall/models/zoo.h"

namespace memwall::cli {

int parse_gpus_per_node(const std::string& text) {
  const int64_t value = parse_count(text, "--gpus-per-node");
  if (value > kMaxGpusPerNode) {
    fail("--gpus-per-node must be at most {} (got {})", kMaxGpusPerNode, value);
  }
  return static_cast<int>(value);
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
  app.add_option("--tensor-parallel", tensor_parallel,
                 "GPT-2, Llama and Mixtral models: the graph of one of N Megatron-LM tensor-parallel "
                 "ranks (heads, MLP and vocabulary split N ways)");
  app.add_option("--expert-parallel", expert_parallel,
                 "Mixtral: the graph of one of N expert-parallel (data-parallel) ranks, each with "
                 "experts / N experts a layer, tokens sent to them by all-to-all");
  app.add_option("--context-parallel", context_parallel,
                 "GPT-2 and Llama with --flash: the graph of one of N context-parallel ranks, "
                 "each with 1/N of every sequence, attention's keys and values passed round a "
                 "ring");
  app.add_option("--shape", shape,
                 "GPT-2 and Llama models at another shape: layers=L,hidden=H,heads=A,kv_heads=K,"
                 "ffn=F,vocab=V,positions=P, any of them (Narayanan et al.'s GPTs, Llama 3 405B)");
  app.add_flag("--sequence-parallel", sequence_parallel,
               "with --tensor-parallel: norms, dropouts and residuals split along the sequence "
               "too (Korthikanti et al. 2022)");
  app.add_flag("--qlora", qlora,
               "QLoRA: NF4 base weights (as --dtype nf4) with LoRA adapters (default r 64 on every "
               "projection, alpha 16)");
}

bool GraphSource::given() const {
  return !graph_file.empty() || (model_option != nullptr && model_option->count() > 0);
}

ModelSource GraphSource::as_given() const {
  ModelSource s = *this;
  s.model_given = model_option != nullptr && model_option->count() > 0;
  s.dtype_given = dtype_option != nullptr && dtype_option->count() > 0;
  s.optimizer_given = optimizer_option != nullptr && optimizer_option->count() > 0;
  return s;
}

namespace {

void print_notes(const std::vector<std::string>& notes) {
  for (const std::string& line : notes) note(line);
}

}  // namespace

void apply_profile_kernels(const Hardware& hw, Graph& graph) {
  std::vector<std::string> notes;
  memwall::apply_profile_kernels(hw, graph, notes);
  print_notes(notes);
}

Graph GraphSource::load(const Hardware& hw) const {
  std::vector<std::string> notes;
  Graph graph = load_model_graph(as_given(), hw, notes);
  print_notes(notes);
  return graph;
}

ModelOptions GraphSource::model_options(const Hardware& hw) const {
  std::vector<std::string> notes;
  ModelOptions options = zoo_model_options(as_given(), hw, notes);
  print_notes(notes);
  return options;
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

void add_export_options(CLI::App& app, SimExports& exports) {
  app.add_option("--trace", exports.trace_file,
                 "write a Chrome trace (Perfetto, chrome://tracing)");
  app.add_option("--svg", exports.svg_file, "write an SVG plot of device memory over time");
}

}  // namespace memwall::cli
