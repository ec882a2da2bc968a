#include "options.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <utility>

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

int parse_gpus_per_node(const std::string& text) {
  const int64_t value = parse_count(text, "--gpus-per-node");
  if (value > kMaxGpusPerNode) {
    fail("--gpus-per-node must be at most {} (got {})", kMaxGpusPerNode, value);
  }
  return static_cast<int>(value);
}

uint64_t parse_bytes(const std::string& text, const char* flag, uint64_t reference) {
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"KiB", 0x1p10}, {"MiB", 0x1p20}, {"GiB", 0x1p30}, {"TiB", 0x1p40}, {"KB", 1e3},
      {"MB", 1e6},     {"GB", 1e9},     {"TB", 1e12},    {"%", 0},        {"B", 1}};
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
    fail("{} must be a positive size such as 42949672960, 40GiB or 80% (got '{}')", flag, text);
  }
  const double bytes = percent ? value / 100 * static_cast<double>(reference) : value * scale;
  if (!(bytes < 0x1p62)) fail("{} {} is above the limit of 2^62 bytes", flag, text);
  if (bytes < 1) fail("{} {} is less than one byte", flag, text);
  return static_cast<uint64_t>(bytes);
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
  Graph g = build_model(model, model_options());
  validate(g);  // the zoo's graphs are checked like any input
  return g;
}

ModelOptions GraphSource::model_options() const {
  if (!graph_file.empty()) fail("this needs a zoo model (--model), not --graph");
  ModelOptions opts;
  opts.batch = positive(batch, "--batch");
  opts.seq = positive(seq, "--seq");
  opts.image = positive(image, "--image");
  opts.precision = parse_precision(dtype);
  opts.optimizer = parse_optimizer(optimizer);
  opts.flash = flash;
  return opts;
}

void GpuSource::add_options(CLI::App& app, const std::string& default_gpu) {
  gpu = default_gpu;
  app.add_option("--gpu", gpu, "built-in GPU profile (see `memwall gpus`)")->capture_default_str();
  app.add_option("--gpu-file", gpu_file,
                 "hardware profile JSON file instead of --gpu: one profile, or an array as "
                 "`memwall gpus --json` prints (its only profile, or the one --gpu names)");
}

Hardware GpuSource::load() const {
  if (!gpu_file.empty()) return read_hardware_file(gpu_file, gpu);
  return find_gpu(gpu);
}

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

}  // namespace memwall::cli
