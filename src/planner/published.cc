// Published measured runs against memwall's predictions (published.h).
#include "memwall/planner/published.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <string_view>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/planner/planner.h"
#include "memwall/swap/optimizer_impl.h"

namespace memwall {
namespace {

using nlohmann::json;

constexpr int64_t kMaxDim = int64_t{1} << 31;  // beyond any model's shape

const json& field(const json& row, const std::string& id, const char* key) {
  const auto it = row.find(key);
  if (it == row.end()) fail("published run '{}': field '{}' is missing", id, key);
  return *it;
}

std::string text_field(const json& row, const std::string& id, const char* key) {
  const json& v = field(row, id, key);
  if (!v.is_string() || v.get<std::string>().empty()) {
    fail("published run '{}': field '{}' must be a non-empty string", id, key);
  }
  return v.get<std::string>();
}

int64_t count_field(const json& row, const std::string& id, const char* key, int64_t most,
                    int64_t fallback = -1) {
  const auto it = row.find(key);
  if (it == row.end()) {
    if (fallback >= 0) return fallback;
    fail("published run '{}': field '{}' is missing", id, key);
  }
  if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > most) {
    fail("published run '{}': field '{}' must be an integer in [1, {}], got {}", id, key, most,
         it->dump());
  }
  return it->get<int64_t>();
}

PublishedMetric parse_metric(const std::string& name, const std::string& id) {
  if (name == "iteration_s") return PublishedMetric::kIterationSeconds;
  if (name == "tokens_per_s_per_gpu") return PublishedMetric::kTokensPerGpu;
  if (name == "tflops_per_gpu_megatron") return PublishedMetric::kTflopsMegatron;
  if (name == "tflops_per_gpu_model") return PublishedMetric::kTflopsModelFlops;
  if (name == "tflops_per_gpu_8n") return PublishedMetric::kTflops8N;
  fail(
      "published run '{}': metric '{}' is unknown (known: iteration_s, tokens_per_s_per_gpu, "
      "tflops_per_gpu_megatron, tflops_per_gpu_model, tflops_per_gpu_8n)",
      id, name);
}

PublishedRun parse_row(const json& row, size_t index) {
  if (!row.is_object()) fail("published run {}: not an object", index);
  PublishedRun r;
  r.id = row.contains("id") && row["id"].is_string() ? row["id"].get<std::string>()
                                                     : fmt::format("#{}", index);
  r.source = text_field(row, r.id, "source");
  r.setting = text_field(row, r.id, "setting");
  r.gpu = text_field(row, r.id, "gpu");
  r.technique = text_field(row, r.id, "technique");
  if (row.contains("checkpointing")) r.checkpointing = text_field(row, r.id, "checkpointing");
  r.ranks = static_cast<int>(count_field(row, r.id, "ranks", 1 << 20, 1));
  if (row.contains("zero_stage")) {
    const json& z = row["zero_stage"];
    if (!z.is_number_integer() || z.get<int>() < 0 || z.get<int>() > 3) {
      fail("published run '{}': field 'zero_stage' must be 0, 1, 2 or 3", r.id);
    }
    r.zero_stage = z.get<int>();
  }
  const json& model = field(row, r.id, "model");
  if (model.is_string()) {
    r.zoo_model = model.get<std::string>();
  } else if (model.is_object() && model.contains("model_type")) {
    r.hf_config = model;
  } else if (model.is_object() && model.contains("zoo")) {
    r.zoo_model = text_field(model, r.id, "zoo");
    if (model.contains("shape")) {
      const json& shape = field(model, r.id, "shape");
      r.shape = {.layers = count_field(shape, r.id, "layers", kMaxDim),
                 .hidden = count_field(shape, r.id, "hidden", kMaxDim),
                 .heads = count_field(shape, r.id, "heads", kMaxDim),
                 .kv_heads = count_field(shape, r.id, "kv_heads", kMaxDim, 0),
                 .ffn = count_field(shape, r.id, "ffn", kMaxDim, 0),
                 .vocab = count_field(shape, r.id, "vocab", kMaxDim),
                 .positions = count_field(shape, r.id, "positions", kMaxDim)};
    }
    if (model.contains("flash")) {
      if (!model["flash"].is_boolean()) fail("published run '{}': 'flash' must be true or false", r.id);
      r.flash = model["flash"].get<bool>();
    }
  } else {
    fail("published run '{}': field 'model' must be a zoo name, {{\"zoo\": NAME, \"shape\": ...}} "
         "or a Hugging Face config",
         r.id);
  }
  if (row.contains("layout")) parse_published_layout(row["layout"], r);
  r.batch = count_field(row, r.id, "batch", kMaxDim, r.layout ? 1 : -1);
  r.seq = count_field(row, r.id, "seq", kMaxDim);
  r.grad_accum = static_cast<int>(count_field(row, r.id, "grad_accum", 1 << 20, 1));
  r.dtype = text_field(row, r.id, "dtype");
  r.optimizer = text_field(row, r.id, "optimizer");
  if (row.contains("optimizer_impl")) {
    r.optimizer_impl = text_field(row, r.id, "optimizer_impl");
    try {
      (void)parse_optimizer_impl(r.optimizer_impl);
    } catch (const Error& e) {
      fail("published run '{}': {}", r.id, e.what());
    }
  }
  r.layers = count_field(row, r.id, "layers", kMaxDim);
  r.hidden = count_field(row, r.id, "hidden", kMaxDim);
  r.vocab = count_field(row, r.id, "vocab", kMaxDim);
  const json& published = field(row, r.id, "published");
  r.metric = parse_metric(text_field(published, r.id, "metric"), r.id);
  const json& value = field(published, r.id, "value");
  if (!value.is_number() || !(value.get<double>() > 0) || !std::isfinite(value.get<double>())) {
    fail("published run '{}': published value must be a positive number", r.id);
  }
  r.value = value.get<double>();
  r.value_text = text_field(published, r.id, "as_published");
  r.deepspeed_model = row.contains("deepspeed_model") ? row["deepspeed_model"] : r.hf_config;
  if (!r.deepspeed_model.is_null() &&
      (!r.deepspeed_model.is_object() || !r.deepspeed_model.contains("model_type"))) {
    fail("published run '{}': field 'deepspeed_model' must be a Hugging Face config", r.id);
  }
  if (row.contains("hardware")) {
    r.hardware = row["hardware"];
    // The machine around the GPU, and the memory of a GPU variant; never
    // the efficiencies the fit sets.
    constexpr std::string_view kHostFields[] = {
        "host_memory_bytes",     "cpu_adam_params_per_s", "interconnect_bandwidth",
        "host_pcie_bandwidth",   "gpus_per_node",         "h2d_bandwidth",
        "d2h_bandwidth",         "device_memory_bytes",   "hbm_bandwidth"};
    if (!r.hardware.is_object() || r.hardware.empty()) {
      fail("published run '{}': field 'hardware' must be an object of profile fields", r.id);
    }
    for (const auto& item : r.hardware.items()) {
      const std::string& key = item.key();
      if (std::find(std::begin(kHostFields), std::end(kHostFields), key) == std::end(kHostFields)) {
        fail("published run '{}': field 'hardware' may set {}, not '{}'", r.id,
             "host_memory_bytes, cpu_adam_params_per_s, interconnect_bandwidth, "
             "host_pcie_bandwidth, gpus_per_node, h2d_bandwidth, d2h_bandwidth, "
             "device_memory_bytes, hbm_bandwidth",
             key);
      }
    }
  }
  if (row.contains("nvme")) {
    if (row["nvme"] != "none") fail("published run '{}': field 'nvme' can only be \"none\"", r.id);
    r.no_nvme = true;
  }
  const json& fitted = field(row, r.id, "fitted");
  if (!fitted.is_boolean()) fail("published run '{}': field 'fitted' must be true or false", r.id);
  r.fitted = fitted.get<bool>();
  if (row.contains("unmatched")) r.unmatched = text_field(row, r.id, "unmatched");
  if (r.fitted && !r.unmatched.empty()) {
    fail("published run '{}': a row memwall cannot match is not fitted", r.id);
  }
  return r;
}

// Megatron-LM's FLOPs per step of one GPU (Narayanan et al., SC 2021,
// eq. 3): 72 B s l h^2 (1 + s / 6h + V / 16lh), 96 with full activation
// recomputation (a second forward), B the GPU's sequences per step.
double megatron_flops(const PublishedRun& r) {
  const double b = sequences_per_gpu(r);
  const double s = static_cast<double>(r.seq), l = static_cast<double>(r.layers);
  const double h = static_cast<double>(r.hidden), v = static_cast<double>(r.vocab);
  const bool recompute = !r.checkpointing.empty() && r.checkpointing != "keep-all";
  return (recompute ? 96 : 72) * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h));
}

// llm-foundry's MFU numerator (scripts/train/benchmarking/collect_results.py):
// 3 (2 N s + 4 l h s^2) FLOPs per sequence, N every parameter.
double model_flops(const PublishedRun& r, double params) {
  const double s = static_cast<double>(r.seq), l = static_cast<double>(r.layers);
  const double h = static_cast<double>(r.hidden);
  return sequences_per_gpu(r) * 3 * (2 * params * s + 4 * l * h * s * s);
}

// Colossal-AI's examples (examples/language/gpt/train_gpt_demo.py,
// get_tflops): 8 N FLOPs per token, forward, backward and the recomputed
// forward of checkpointing, N every parameter.
double flops_8n(const PublishedRun& r, double params) {
  return 8 * params * sequences_per_gpu(r) * static_cast<double>(r.seq);
}

double step_tokens(const PublishedRun& r) {
  return sequences_per_gpu(r) * static_cast<double>(r.seq);
}

}  // namespace

std::vector<PublishedRun> parse_published_runs(const json& document) {
  if (!document.is_object() || document.value("format", "") != "memwall.published/1") {
    fail("published runs: not a memwall.published/1 document");
  }
  const auto rows = document.find("rows");
  if (rows == document.end() || !rows->is_array() || rows->empty()) {
    fail("published runs: 'rows' must be a non-empty array");
  }
  std::vector<PublishedRun> out;
  for (size_t i = 0; i < rows->size(); ++i) {
    out.push_back(parse_row((*rows)[i], i));
    for (size_t j = 0; j + 1 < out.size(); ++j) {
      if (out[j].id == out.back().id) fail("published runs: id '{}' appears twice", out[j].id);
    }
  }
  return out;
}

namespace {

// What one step of one GPU does in the metric's own unit (tokens, or TFLOP
// by the source's formula): the published rate is that over the step's
// seconds. 0 for a metric that is the step's seconds itself.
double step_work(const PublishedRun& r, double params) {
  switch (r.metric) {
    case PublishedMetric::kIterationSeconds:
      return 0;
    case PublishedMetric::kTokensPerGpu:
      return step_tokens(r);
    case PublishedMetric::kTflopsMegatron:
      return megatron_flops(r) / 1e12;
    case PublishedMetric::kTflopsModelFlops:
      return model_flops(r, params) / 1e12;
    case PublishedMetric::kTflops8N:
      return flops_8n(r, params) / 1e12;
  }
  return 0;
}

}  // namespace

Hardware published_hardware(const PublishedRun& run) {
  const Hardware& builtin = find_gpu(run.gpu);
  if (run.hardware.is_null()) return builtin;
  json merged = hardware_to_json(builtin);
  merged.update(run.hardware);
  try {
    return hardware_from_json(merged);
  } catch (const Error& e) {
    fail("published run '{}': field 'hardware': {}", run.id, e.what());
  }
}

double published_step_seconds(const PublishedRun& r, double params) {
  const double work = step_work(r, params);
  return work > 0 ? work / r.value : r.value;
}

double in_metric(const PublishedRun& r, double step_seconds, double params) {
  if (!(step_seconds > 0)) return 0;
  const double work = step_work(r, params);
  return work > 0 ? work / step_seconds : step_seconds;
}

// Note [Published runs over memory]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A published run fitted its GPU. When memwall's plan of the same setting
// does not, the memory model and the run differ, most often in code the
// row's trace does not have: llm-foundry computes its loss with
// flash-attn's fused cross entropy, while the Hugging Face model the row
// traces upcasts the logits to fp32 (a 350M MPT at micro-batch 16 and seq
// 2048: 6.6 GB of fp32 logits and as much for their log-softmax). The
// row's time still says how fast the same kernels run, so it is predicted
// from the technique's plan without a device limit, and the table shows
// the overrun beside it; the technique, not the budget, fixes what is
// recomputed.
PublishedPrediction predict_published(const PublishedRun& run, const Graph& graph,
                                      const Hardware& hw) {
  if (run.layout) return predict_published_layout(run, hw);
  PlannerOptions options;
  options.ranks = run.ranks;
  options.zero_stage = run.zero_stage;
  options.checkpointing = run.checkpointing;
  options.no_nvme = run.no_nvme;
  options.budget = default_budget(hw);
  options.time_limit = 60;
  Candidate c = plan_single_technique(graph, hw, options, run.technique);
  PublishedPrediction p;
  if (!c.fits && c.short_of.memory == Tier::kDevice) {
    // Note [Published runs over memory]: the run ran; its time is still
    // predicted, and the row says by how much memwall's peak is over.
    p.over_memory = c.why;
    options.budget = kMaxBytes;
    c = plan_single_technique(graph, hw, options, run.technique);
  }
  p.fits = c.fits;
  p.why = c.why;
  p.plan = fmt::format("{}; {}", c.states.name(), c.activations);
  if (!c.fits) return p;
  p.iteration_seconds = c.sim.iteration_time;
  p.device_peak = c.sim.peak_bytes[static_cast<size_t>(Tier::kDevice)];
  for (const Op& op : c.graph.ops) {
    if (op.phase == Phase::kOptimizer) p.optimizer_seconds += op_time(hw, c.graph, op);
  }
  for (const Buffer& b : c.graph.buffers) {
    if (b.kind != BufferKind::kParam && b.kind != BufferKind::kGrad &&
        b.kind != BufferKind::kOptimState) {
      continue;
    }
    const auto at = c.plan.placement.find(b.id);
    bool on_device = at == c.plan.placement.end() || at->second == Tier::kDevice;
    // A gradient the CPU steps lives on the host once backward has made it.
    if (b.kind == BufferKind::kGrad && c.states.optimizer != Tier::kDevice) on_device = false;
    (on_device ? p.state_device_bytes : p.state_host_bytes) += b.bytes;
  }
  // Gradient accumulation: the micro-batches after the first run forward and
  // backward (with their collectives) but no optimizer step.
  const double repeat = std::max(0.0, p.iteration_seconds - p.optimizer_seconds);
  p.step_seconds = p.iteration_seconds + (run.grad_accum - 1) * repeat;
  return p;
}

json deepspeed_request(const PublishedRun& run, const Hardware& hw) {
  if (run.deepspeed_model.is_null()) return nullptr;
  int stage = run.zero_stage.value_or(0);
  bool cpu_offload = false, offload_params = false;
  if (run.technique == "zero-offload") {
    stage = std::max(stage, 2);
    cpu_offload = true;
  } else if (run.technique == "zero-infinity") {
    stage = 3;
    cpu_offload = offload_params = true;
  }
  if (stage < 2) return nullptr;  // the estimators are for stages 2 and 3
  const int per_node = std::min(run.ranks, std::max(1, hw.gpus_per_node));
  const int nodes = (run.ranks + per_node - 1) / per_node;
  return {{"id", run.id},
          {"config", run.deepspeed_model},
          {"stage", stage},
          {"gpus_per_node", per_node},
          {"nodes", nodes},
          {"cpu_offload", cpu_offload},
          {"offload_params", offload_params}};
}

}  // namespace memwall
