// The layout search of `memwall plan --gpus N` (Note [Layout search] in
// src/planner/pipeline_layout.cc): data x tensor x pipeline parallelism,
// the micro-batch, its count and the schedule, each layout a pipeline plan
// simulated, the fastest that fits each device's budget chosen.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/planner/pipeline_plan.h"

namespace memwall {

struct LayoutRequest {
  int gpus = 1;
  int64_t global_batch = 1;  // samples a step, over every data-parallel replica
  uint64_t budget = 0;       // bytes a device; 0: default_budget
  // Per-layer recomputation on or off in every layout; nullopt: the search
  // chooses (Note [Layout search]).
  std::optional<ChunkRecompute> recompute;
  // Parts of the layout fixed by the request (0: searched): a published
  // layout is predicted with only its micro-batch and schedule searched.
  int tensor_parallel = 0;
  int pipeline_parallel = 0;
  int expert_parallel = 0;  // a mixture of experts': among the data-parallel replicas
  // Context parallelism (GPT-2 and Llama with flash attention); searched
  // where each rank keeps at least kLeastContextPositions positions.
  int context_parallel = 0;
  // Sequence parallelism wherever t > 1 (nullopt: on, Korthikanti et al.'s
  // default); false for layouts from before it (Narayanan et al. 2021).
  std::optional<bool> sequence_parallel;
  // ZeRO-1 over the replicas (Megatron-LM's distributed optimizer), or a
  // plain all-reduce of the gradients.
  bool distributed_optimizer = true;
  // ZeRO stage 2 or 3 in every layout with replicas (Note [ZeRO in a
  // pipeline stage]); 0: as distributed_optimizer says.
  int zero_stage = 0;
  // Every stage's optimizer states on the host (Note [Offload in a
  // pipeline stage]); false: the search tries it where nothing else fits.
  bool offload_optimizer = false;
  PipelinePartition partition = PipelinePartition::kTarnawski;
  PipelineEngine engine = PipelineEngine::kMegatron;  // Note [Pipeline engines]
};

struct LayoutCandidate {
  int tensor_parallel = 1;
  int pipeline_parallel = 1;
  int data_parallel = 1;
  int expert_parallel = 1;
  int context_parallel = 1;
  int64_t micro_batch = 1;
  int micro_batches = 1;
  int chunks_per_device = 1;
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  ChunkRecompute recompute = ChunkRecompute::kNone;
  int zero_stage = 0;  // over the replicas; 0 or 1 as the request's distributed_optimizer
  bool offload_optimizer = false;
  bool fits = false;
  double step_time = 0;  // simulated; 0 where no plan was made
  double tokens_per_s = 0;
  double mfu = 0;
  uint64_t peak_bytes = 0;  // the fullest device's
  std::string why_not;      // for one that does not fit or could not be planned
};

struct LayoutSearch {
  std::vector<LayoutCandidate> candidates;  // fitting ones fastest first, then the rest
  std::optional<PipelinePlan> best;         // the first candidate's plan, when it fits
  std::string best_graph_name;
  std::optional<Graph> best_graph;  // the graph the best plan cuts (one rank's)
  double seconds = 0;  // the search's wall time
};

// The fewest positions of each sequence the layout search gives a
// context-parallel rank (Note [Layout search]).
inline constexpr int64_t kLeastContextPositions = 4096;

// `options` are the zoo model's (batch, tensor and sequence parallelism
// are the search's). Throws Error on counts out of range; a search where
// nothing fits returns no best.
LayoutSearch search_layouts(std::string_view model, const ModelOptions& options,
                            const Hardware& node, const LayoutRequest& request);

// "tp 2 x pp 4 x dp 8, micro-batch 2 x 16, interleaved (2 chunks)" ("tp 8
// x cp 16 x pp 16 x dp 8" with context parallelism), and
// ", per-layer recompute" where it recomputes.
std::string layout_label(const LayoutCandidate& c);

}  // namespace memwall
