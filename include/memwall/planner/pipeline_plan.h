// A pipeline-parallel plan of a zoo or traced graph: its partition into
// chunks, and the pipeline simulation of one step (docs/pipeline.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/planner/pipeline_partition.h"
#include "memwall/sim/pipeline_chunks.h"
#include "memwall/sim/pipeline.h"

namespace memwall {

enum class PipelinePartition : uint8_t {
  kTarnawski,  // the dynamic programme (Note [Pipeline partitioning])
  kEvenLayers  // Megatron-LM's even split of the layers
};

struct PipelineRequest {
  int devices = 1;  // pipeline stages' devices (each a tensor-parallel rank of its stage)
  int data_parallel = 1;  // replicas of the whole pipeline, which all-reduce their gradients
  // ZeRO stage 1 over the replicas (Megatron-LM's distributed optimizer):
  // each holds and steps 1/d of the optimizer states; gradients are
  // reduce-scattered and the updated parameters all-gathered.
  bool distributed_optimizer = false;
  // ZeRO stage 2 or 3 over the replicas (Note [ZeRO in a pipeline stage] in
  // src/sim/pipeline_zero.cc): the gradients, and the parameters, sharded
  // too; 0 or 1: as distributed_optimizer says.
  int zero_stage = 0;
  // Each stage's optimizer states in host memory, stepped by the CPU
  // (ZeRO-Offload per stage: Note [Offload in a pipeline stage] in
  // src/planner/pipeline_plan.cc).
  bool offload_optimizer = false;
  // Each stage's activations swapped to the host between forward and
  // backward (Note [Swapped activations in a pipeline stage] in
  // src/sim/pipeline.cc).
  bool swap_activations = false;
  int chunks_per_device = 1;
  int micro_batches = 1;
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  PipelinePartition partition = PipelinePartition::kTarnawski;
  uint64_t budget = 0;  // bytes a device; 0: default_budget
  // What each chunk recomputes (Note [Pipeline recomputation]); the
  // overload over a ChunkedGraph takes the chunked graph's.
  ChunkRecompute recompute = ChunkRecompute::kNone;
  // Whose pipeline runs it (Note [Pipeline engines]); the overload over a
  // ChunkedGraph takes the chunked graph's.
  PipelineEngine engine = PipelineEngine::kMegatron;
  // Where no cut fits, plan the cut needing least memory (fits false)
  // instead of throwing: the layout search's rows of layouts that do not fit.
  bool allow_over_budget = false;
};

struct PipelinePlan {
  PipelineShape shape;
  PipelinePartition partition = PipelinePartition::kTarnawski;
  ChunkRecompute recompute = ChunkRecompute::kNone;
  PipelineEngine engine = PipelineEngine::kMegatron;
  uint64_t budget = 0;
  int tensor_parallel = 1;
  int data_parallel = 1;
  int expert_parallel = 1;  // the graph's (among the data-parallel replicas)
  int context_parallel = 1;  // the graph's
  bool distributed_optimizer = false;
  int zero_stage = 0;  // 0 to 3: what is sharded over the replicas (1: distributed_optimizer)
  bool offload_optimizer = false;
  bool swap_activations = false;
  // With either: the host memory the node's ranks hold together (the fullest
  // device's host states and swapped activations times the node's GPUs),
  // within the node's or not.
  uint64_t host_bytes_per_node = 0;
  bool host_fits = true;
  int gpus = 1;  // devices x tensor-parallel x context-parallel ranks x data-parallel replicas
  PipelineCut cut;
  std::vector<std::string> chunk_names;  // each chunk's first forward op
  std::vector<ChunkCost> costs;
  PipelineResult sim;
  bool fits = false;  // every device's simulated peak within the budget
  double tokens_per_s = 0;  // all replicas together; 0 without a sequence
  double samples_per_s = 0;
  double mfu = 0;  // per GPU: the model's FLOPs of the step's micro-batches over GPUs x step x peak
};

// Throws Error on bad counts, a graph without a backward, no cut that fits
// the budget (partition_error's line; unless allow_over_budget), or an
// even split the layers do not allow.
PipelinePlan plan_pipeline(const Graph& graph, const Hardware& node, const PipelineRequest& request);
// The same over a graph already chunked (with `node` and the request's
// recomputation; Error if it differs), whose chunk costs carry over from
// plan to plan: the layout search's many plans of one graph.
PipelinePlan plan_pipeline(const ChunkedGraph& chunked, const Hardware& node,
                           const PipelineRequest& request);

std::string_view to_string(PipelinePartition partition);
std::optional<PipelinePartition> parse_pipeline_partition(std::string_view name);

}  // namespace memwall
