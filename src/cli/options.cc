#include "options.h"

#include <charconv>

#include "memwall/graph/error.h"
#include "memwall/graph/graph.h"
#include "memwall/models/zoo.h"

namespace memwall::cli {
namespace {

// Zero or negative sizes are refused here: inside ModelOptions 0 means
// "the model's default", which a user typing 0 did not ask for.
int64_t positive(const std::optional<std::string>& value, const char* flag) {
  return value ? parse_count(*value, flag) : 0;
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

void GraphSource::add_options(CLI::App& app, const std::string& default_model) {
  model = default_model;
  app.add_option("--model", model, "built-in model (see `memwall models`)")->capture_default_str();
  app.add_option("--graph", graph_file, "read a memwall.graph/1 JSON file instead of --model");
  app.add_option("--batch", batch, "batch size (default: the model's)");
  app.add_option("--seq", seq, "sequence length, transformers (default: the model's)");
  app.add_option("--image", image, "image side in pixels, CNNs (default: the model's)");
  app.add_option("--dtype", dtype, "fp32, or bf16/fp16 mixed precision")->capture_default_str();
  app.add_option("--optimizer", optimizer, "sgd, momentum, adam or adamw")->capture_default_str();
  app.add_flag("--flash", flash, "fused flash attention (saves no s x s tensors)");
}

Graph GraphSource::load() const {
  if (!graph_file.empty()) {
    if (batch || seq || image || flash)
      fail("--batch/--seq/--image/--flash apply to --model, not --graph");
    return read_graph_file(graph_file);
  }
  ModelOptions opts;
  opts.batch = positive(batch, "--batch");
  opts.seq = positive(seq, "--seq");
  opts.image = positive(image, "--image");
  opts.precision = parse_precision(dtype);
  opts.optimizer = parse_optimizer(optimizer);
  opts.flash = flash;
  Graph g = build_model(model, opts);
  validate(g);  // the zoo's graphs are checked like any input
  return g;
}

void GpuSource::add_options(CLI::App& app, const std::string& default_gpu) {
  gpu = default_gpu;
  app.add_option("--gpu", gpu, "built-in GPU profile (see `memwall gpus`)")->capture_default_str();
  app.add_option("--gpu-file", gpu_file, "hardware profile JSON file instead of --gpu");
}

Hardware GpuSource::load() const {
  if (!gpu_file.empty()) return read_hardware_file(gpu_file);
  return find_gpu(gpu);
}

}  // namespace memwall::cli
