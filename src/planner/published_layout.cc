// Published many-GPU layouts against memwall's layout search
// (memwall/planner/published.h; docs/pipeline.md, "Published layouts").
//
// Note [Published layouts]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// A row with a "layout" states its tensor, pipeline (and context) sizes, its GPUs and
// global batch, and whether it recomputed; the sources (Narayanan et al.
// 2021's Table 1) do not state the micro-batch or the schedule each run
// used, which their authors tuned. So memwall predicts such a row the way a
// user would plan it: the layout search fixed to the row's tensor and
// pipeline sizes, its partition (Megatron-LM's even split, or Tarnawski's
// programme where the layers do not split evenly, as Llama 3 405B's 126 on
// 16 stages) and its recomputation (the search's choice where the source
// does not say), choosing the micro-batch and 1F1B or interleaved 1F1B,
// the fastest whose every device fits the GPU. The prediction names the
// choice. Where nothing fits, the least-memory layout's time is predicted
// and over_memory says by how much it is over (Note [Published runs over
// memory] in published.cc).
#include <algorithm>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/base/human.h"
#include "memwall/planner/budget.h"
#include "memwall/planner/pipeline_layout.h"
#include "memwall/planner/published.h"

namespace memwall {
namespace {

using json = nlohmann::json;

constexpr int64_t kMaxLayoutBatch = int64_t{1} << 24;
constexpr int kMaxLayoutRanks = 1 << 20;

int64_t layout_count(const json& layout, const PublishedRun& run, const char* key, int64_t most,
                     int64_t fallback) {
  const auto it = layout.find(key);
  if (it == layout.end()) {
    if (fallback >= 1) return fallback;
    fail("published run '{}': field 'layout.{}' is missing", run.id, key);
  }
  if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > most) {
    fail("published run '{}': field 'layout.{}' must be an integer in [1, {}]", run.id, key, most);
  }
  return it->get<int64_t>();
}

bool layout_flag(const json& layout, const PublishedRun& run, const char* key) {
  const auto it = layout.find(key);
  if (it == layout.end()) return false;
  if (!it->is_boolean()) fail("published run '{}': field 'layout.{}' must be true or false", run.id, key);
  return it->get<bool>();
}

}  // namespace

void parse_published_layout(const json& layout, PublishedRun& run) {
  if (!layout.is_object()) fail("published run '{}': field 'layout' must be an object", run.id);
  PublishedLayout l;
  l.tensor_parallel = static_cast<int>(layout_count(layout, run, "tensor_parallel", 1024, 1));
  l.pipeline_parallel =
      static_cast<int>(layout_count(layout, run, "pipeline_parallel", 1 << 16, 1));
  l.context_parallel =
      static_cast<int>(layout_count(layout, run, "context_parallel", 1024, 1));
  l.global_batch = layout_count(layout, run, "global_batch", kMaxLayoutBatch, 0);
  l.sequence_parallel = layout_flag(layout, run, "sequence_parallel");
  l.distributed_optimizer = layout_flag(layout, run, "distributed_optimizer");
  if (layout.contains("partition")) {
    const json& p = layout["partition"];
    const auto partition =
        p.is_string() ? parse_pipeline_partition(p.get<std::string>()) : std::nullopt;
    if (!partition) {
      fail("published run '{}': field 'layout.partition' must be tarnawski or even", run.id);
    }
    l.partition = *partition;
  }
  run.layout = l;
}

double sequences_per_gpu(const PublishedRun& run) {
  if (!run.layout) return static_cast<double>(run.batch) * run.grad_accum;
  const double gpus = static_cast<double>(run.ranks) * run.layout->tensor_parallel *
                      run.layout->pipeline_parallel * run.layout->context_parallel;
  return static_cast<double>(run.layout->global_batch) / gpus;
}

int64_t published_gpus(const PublishedRun& run) {
  if (!run.layout) return run.ranks;
  return int64_t{run.ranks} * run.layout->tensor_parallel * run.layout->pipeline_parallel *
         run.layout->context_parallel;
}

ModelOptions published_model_options(const PublishedRun& run) {
  ModelOptions o;
  o.seq = run.seq;
  o.precision = parse_precision(run.dtype);
  o.optimizer = parse_optimizer(run.optimizer);
  o.flash = run.flash;
  o.shape = run.shape;
  return o;
}

PublishedPrediction predict_published_layout(const PublishedRun& run, const Hardware& hw) {
  const PublishedLayout& l = run.layout.value();
  if (run.zoo_model.empty()) {
    fail("published run '{}': a layout row's model is a zoo model (tensor parallelism is built "
         "into the zoo's GPT-2 and Llama graphs)",
         run.id);
  }
  const int64_t gpus = published_gpus(run);
  if (gpus > kMaxLayoutRanks) fail("published run '{}': {} GPUs is more than 2^20", run.id, gpus);
  LayoutRequest request;
  request.gpus = static_cast<int>(gpus);
  request.global_batch = l.global_batch;
  request.tensor_parallel = l.tensor_parallel;
  request.pipeline_parallel = l.pipeline_parallel;
  request.context_parallel = l.context_parallel;
  request.sequence_parallel = l.sequence_parallel;
  request.distributed_optimizer = l.distributed_optimizer;
  request.partition = l.partition;
  // Not stated by the source (empty): the search keeps every activation
  // where that fits and recomputes per layer where not.
  if (!run.checkpointing.empty()) {
    request.recompute = parse_chunk_recompute(run.checkpointing);
    if (!request.recompute) {
      fail("published run '{}': a layout row recomputes per-layer or selectively, or keeps "
           "all (got '{}')",
           run.id, run.checkpointing);
    }
  }
  const ModelOptions options = published_model_options(run);  // the request fixes t
  PublishedPrediction p;
  LayoutSearch search = search_layouts(run.zoo_model, options, hw, request);
  if (!search.best) {
    // Note [Published layouts]: nothing fits; the least-memory layout's
    // time, with how far it is over.
    const auto planned = std::find_if(search.candidates.begin(), search.candidates.end(),
                                      [](const LayoutCandidate& c) { return c.step_time > 0; });
    if (planned == search.candidates.end()) {
      p.why = search.candidates.empty() ? "no layout of the row's sizes can be planned"
                                        : search.candidates.front().why_not;
      return p;
    }
    p.over_memory = fmt::format("{}: the fullest device needs {}, over the {} a GPU allows",
                                layout_label(*planned), human_bytes(planned->peak_bytes),
                                human_bytes(default_budget(hw)));
    request.budget = planned->peak_bytes;
    search = search_layouts(run.zoo_model, options, hw, request);
    if (!search.best) {
      p.why = p.over_memory;
      return p;
    }
  }
  const PipelinePlan& plan = *search.best;
  p.fits = true;
  p.step_seconds = plan.sim.step_time;
  p.iteration_seconds = plan.sim.step_time / plan.shape.micro_batches;
  for (const PipelineDevice& d : plan.sim.devices) {
    p.device_peak = std::max(p.device_peak, d.peak_bytes);
    p.optimizer_seconds = std::max(p.optimizer_seconds, d.optimizer);
  }
  p.plan = fmt::format("{}; bubble {:.1f}%", layout_label(search.candidates.front()),
                       100 * plan.sim.bubble_fraction);
  return p;
}

}  // namespace memwall
