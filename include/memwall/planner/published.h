// Published measured training runs against memwall's predictions (`memwall
// bench published`, docs/cost-model.md "Fitted to published runs"): each
// row is one run a paper or a repository reports, with its exact setting;
// memwall plans the same technique on the same model and compares its
// simulated step with the published one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/planner/pipeline_plan.h"

namespace memwall {

// What a row publishes, converted to seconds per optimizer step with the
// source's own formula (published_step_seconds).
enum class PublishedMetric {
  kIterationSeconds,  // seconds per optimizer step
  kTokensPerGpu,      // tokens per second per GPU
  kTflopsMegatron,    // TFLOP/s per GPU counted by Megatron-LM's formula
  kTflopsModelFlops,  // TFLOP/s per GPU counted as 6 N tokens + attention (llm-foundry's MFU)
  kTflops8N,          // TFLOP/s per GPU counted as 8 N tokens (Colossal-AI's examples)
};

// A published many-GPU layout (Megatron-LM's tensor x pipeline x data
// parallelism): memwall predicts it with the layout search fixed to its
// tensor and pipeline sizes, choosing the micro-batch and the schedule
// (published_layout.cc).
struct PublishedLayout {
  int tensor_parallel = 1;
  int pipeline_parallel = 1;
  int context_parallel = 1;  // its ranks among the data-parallel ones' GPUs
  bool sequence_parallel = false;
  bool distributed_optimizer = false;
  PipelinePartition partition = PipelinePartition::kEvenLayers;
  int64_t global_batch = 1;  // sequences a step over every replica
};

struct PublishedRun {
  std::string id;
  std::string source;   // the citation: paper and table, or repository, path and commit
  std::string setting;  // the setting in words, as the source states it
  std::string gpu;      // built-in profile
  int ranks = 1;        // data-parallel GPUs
  std::optional<int> zero_stage;
  std::string technique;      // a single technique (plan_single_technique)
  std::string checkpointing;  // a remat planner the technique runs with; empty: its own
  // The model: a zoo name, or a Hugging Face config traced on the meta device.
  std::string zoo_model;
  ModelShape shape;  // {"zoo": NAME, "shape": {...}}: the zoo model at another shape
  bool flash = true;   // zoo rows: SDPA's fused attention ("flash": false in the model)
  nlohmann::json hf_config;
  int64_t batch = 1;  // micro-batch per GPU
  int64_t seq = 0;
  int grad_accum = 1;  // micro-batches per optimizer step
  std::string dtype = "bf16";
  std::string optimizer = "adamw";
  // How the source's optimizer ran on the device (Note [Optimizer as the
  // device runs it] in src/swap/optimizer_impl.cc): for-loop, foreach, fused.
  std::string optimizer_impl = "foreach";
  // The shape the source's FLOP formula reads (layers, hidden, vocab).
  int64_t layers = 0, hidden = 0, vocab = 0;
  PublishedMetric metric = PublishedMetric::kIterationSeconds;
  double value = 0;        // the published figure in the metric's unit
  std::string value_text;  // as the source prints it (a range, a log line)
  bool fitted = false;     // the fit reads this row; the others are held out
  // Why memwall cannot match the row, from the source's own evidence (its
  // log's phase times, a setting memwall cannot express): shown with its
  // ratio, never fitted, left out of the held-out statistics. Empty: matched.
  std::string unmatched;
  // The Hugging Face configuration DeepSpeed's estimators build (the
  // model's own for traced rows; "deepspeed_model" for zoo rows); null:
  // none given.
  nlohmann::json deepspeed_model;
  // The machine where it differs from the built-in profile (the host, how
  // the GPUs connect), as the source describes it: hardware-profile fields
  // laid over `gpu` (published_hardware); null: the profile as it is.
  nlohmann::json hardware;
  bool no_nvme = false;  // "nvme": "none": the run had no NVMe offload
  std::optional<PublishedLayout> layout;  // "layout": many GPUs in tensor and pipeline parallelism
};

// Sequences one GPU's share of a step holds: the micro-batch times the
// accumulation, or a layout's global batch over its GPUs (t x p x d).
double sequences_per_gpu(const PublishedRun& run);
// Every GPU of the run: the data-parallel ranks, times a layout's tensor
// and pipeline sizes.
int64_t published_gpus(const PublishedRun& run);

// The row's GPU profile with its "hardware" fields laid over it.
Hardware published_hardware(const PublishedRun& run);

// Rows of a memwall.published/1 document; throws Error with one line naming
// the row and the field.
std::vector<PublishedRun> parse_published_runs(const nlohmann::json& document);
// The document compiled into memwall (bench/published_runs.json).
const nlohmann::json& builtin_published_runs();

// The published figure as seconds per optimizer step of one GPU; `params`
// is the model's parameter count (the graph's), read by the FLOP formulas.
double published_step_seconds(const PublishedRun& run, double params);
// A step time in the row's metric (the inverse of published_step_seconds).
double in_metric(const PublishedRun& run, double step_seconds, double params);

struct PublishedPrediction {
  bool fits = false;
  std::string why;  // when it does not fit
  // Note [Published runs over memory] (published.cc): why the plan does not
  // fit the GPU, when it does not and the time comes from a plan without a
  // device limit; empty when it fits.
  std::string over_memory;
  double iteration_seconds = 0;  // one micro-batch's iteration, as simulated
  double optimizer_seconds = 0;  // its optimizer steps on the device
  double step_seconds = 0;       // grad_accum micro-batches and one optimizer step
  uint64_t device_peak = 0;
  std::string plan;  // states and activations, in words
  // Model-state bytes one rank keeps (parameters, gradients, optimizer
  // states, master copies) on its GPU and on the host, as the plan places
  // them: what DeepSpeed's estimators estimate.
  uint64_t state_device_bytes = 0;
  uint64_t state_host_bytes = 0;
};

// The request DeepSpeed's estimators answer for the row (python/memwall/
// deepspeed_estimates.py), or null for a row without ZeRO or a model for
// them: ZeRO-Offload is stage 2 with cpu_offload (as DeepSpeed ships it),
// ZeRO-Infinity stage 3 with the parameters offloaded too, FSDP's full
// shard stage 3. `hw` gives the GPUs per node.
nlohmann::json deepspeed_request(const PublishedRun& run, const Hardware& hw);

// memwall's plan of the row's technique on `graph` (the row's model at its
// micro-batch) on `hw`, the GPU's full memory less the framework reserve as
// the budget. Micro-batches after the first repeat the iteration without
// the optimizer step. A row with a layout is the layout search's
// (predict_published_layout).
PublishedPrediction predict_published(const PublishedRun& run, const Graph& graph,
                                      const Hardware& hw);

// A layout row: search_layouts over the row's zoo model fixed to its tensor
// and pipeline sizes, its recomputation and partition; the fastest
// micro-batch and schedule that fit (or, none fitting, the one needing
// least memory, with over_memory saying so).
PublishedPrediction predict_published_layout(const PublishedRun& run, const Hardware& hw);
// The row's zoo model options (shape, dtype, optimizer, sequence), one
// tensor-parallel rank: the whole model, whose parameters the FLOP
// formulas count (a layout's search splits it).
ModelOptions published_model_options(const PublishedRun& run);
// Reads a row's "layout" object into run.layout; throws Error naming the field.
void parse_published_layout(const nlohmann::json& layout, PublishedRun& run);

}  // namespace memwall
