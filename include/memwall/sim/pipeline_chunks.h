// A training graph cut into pipeline chunks, and what one micro-batch costs
// on each (Note [Pipeline chunks] in src/sim/pipeline_chunks.cc). The graph is
// one micro-batch's iteration; a cut is where each chunk's forward starts; the partition that
// chooses one is the planner's (memwall/planner/pipeline_partition.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "memwall/graph/layers.h"
#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/sim/pipeline.h"

namespace memwall {

// Whose pipeline runs the chunks, which decides what a stage keeps besides
// its own ops' buffers (Note [Pipeline engines] in src/sim/pipeline_chunks.cc).
enum class PipelineEngine : uint8_t {
  kMegatron,  // Megatron-LM: received tensors live as the chunk's ops use them
  kTorch      // torch.distributed.pipelining: receive buffers kept, outputs cached
};
std::string_view to_string(PipelineEngine engine);

// What each chunk recomputes (Note [Pipeline recomputation] in
// src/sim/pipeline_recompute.cc).
enum class ChunkRecompute : uint8_t {
  kNone,
  // Megatron-LM's full recomputation (--recompute-granularity full
  // --recompute-method uniform --recompute-num-layers 1): each layer keeps
  // its input, and reruns its forward just before its backward.
  kFullLayers,
  // Korthikanti et al. 2022's selective recomputation (Megatron-LM's
  // --recompute-granularity selective): each layer drops its attention
  // core's s x s tensors and reruns the ops that make them.
  kSelective,
};
// keep-all, per-layer, selective (the names of the one-GPU planners that
// checkpoint the same way, docs/remat-per-layer.md, docs/remat-selective.md).
std::string_view to_string(ChunkRecompute recompute);
// keep-all, per-layer; nullopt for any other name.
std::optional<ChunkRecompute> parse_chunk_recompute(std::string_view name);

// The ops of a graph by the forward position they follow (Note [Pipeline
// chunks]): a chunk [a, b) of forward positions holds every op whose anchor
// is in it.
class ChunkedGraph {
 public:
  // Throws Error for a graph without a backward (nothing to pipeline).
  ChunkedGraph(const Graph& graph, const Hardware& hardware,
               ChunkRecompute recompute = ChunkRecompute::kNone,
               PipelineEngine engine = PipelineEngine::kMegatron);

  const Graph& graph() const { return graph_; }
  ChunkRecompute recompute() const { return recompute_; }
  PipelineEngine engine() const { return engine_; }
  // Whether its recomputation drops any storage (selective drops none of a
  // graph without s x s attention tensors).
  bool drops_anything() const { return drops_anything_; }
  // Forward positions: the ops before the first backward op, in order.
  int forward_ops() const { return static_cast<int>(forward_.size()); }
  OpId forward_op(int position) const { return forward_[position]; }
  // Per op: the forward position it goes with.
  int anchor(OpId op) const { return anchor_[op]; }
  // Where a cut may fall, ascending, 0 first: the start of each layer
  // (Note [What a layer is]), the ops before the first layer going with
  // it; every forward position when `every_op`.
  std::vector<int> cut_points(bool every_op) const;

  // One micro-batch on the chunk of forward positions [begin, end): its
  // times, states, saved and peak bytes, and what crosses its ends. One
  // pass over the graph the first time, then remembered (not thread-safe:
  // one ChunkedGraph a thread).
  ChunkCost cost(int begin, int end) const;
  // Bytes of the non-state buffers made by forward positions before `cut`
  // and read by forward positions from it on: what one micro-batch's
  // forward sends across the cut (the batch's inputs, which every stage
  // reads from its data loader, left out).
  uint64_t forward_crossing(int cut) const { return forward_crossing_[cut]; }
  uint64_t backward_crossing(int cut) const { return backward_crossing_[cut]; }

 private:
  ChunkCost measure(int begin, int end) const;
  int backward_anchor(const Op& op, const std::vector<int>& made_at,
                      const std::vector<int>& made_by_anchor,
                      const std::vector<std::vector<int>>& read_at,
                      const std::vector<BufferId>& param_of, int last) const;

  // The chunk's ops in order, each with whether it is a recomputation
  // (Note [Pipeline recomputation]).
  std::vector<std::pair<OpId, bool>> run_order(const std::vector<OpId>& ops, int begin,
                                               int end) const;
  void hide_ring_exchanges();
  void find_droppable();
  void find_selective();

  const Graph& graph_;
  const Hardware& hardware_;
  ChunkRecompute recompute_;
  PipelineEngine engine_;
  std::vector<int> maker_anchor_;       // per buffer: its maker's position, kNoPosition for inputs
  std::vector<int> last_forward_read_;  // per buffer: the last forward position reading it
  std::vector<int> layer_of_op_;        // per op: its forward layer, -1 for none
  std::vector<std::vector<OpId>> layer_forward_;  // per layer: its forward ops in order
  std::vector<std::vector<OpId>> layer_rerun_;    // per layer: the forward ops it reruns, in order
  std::vector<uint8_t> remade_;
  bool drops_anything_ = false;     // per storage: a rerun makes a second instance of it
  std::vector<int> made_in_layer_;  // per storage: the layer whose forward makes it, -1 for none
  std::vector<uint8_t> droppable_;  // per storage: freed after its forward, recomputed for backward
  std::vector<OpId> forward_;
  std::vector<int> anchor_;
  std::vector<double> seconds_;           // per op
  std::vector<uint8_t> is_state_;         // per buffer
  std::vector<uint8_t> is_expert_state_;  // per buffer: an expert-parallel expert's state
  std::vector<std::vector<BufferId>>
      states_of_param_;             // per buffer: a parameter's grads and optimizer states
  std::vector<BufferId> storage_;   // per buffer: the root of its versions
  Layers layers_;                   // find_layers of the graph
  std::vector<int> unit_of_param_;  // per parameter storage: its ZeRO-3 unit, -1 for none
  int units_ = 0;
  std::vector<std::pair<int, int>> param_reads_;  // per parameter: first, last forward reader
  std::vector<uint64_t> forward_crossing_;        // per cut 0..forward_ops()
  std::vector<uint64_t> backward_crossing_;
  mutable std::unordered_map<int64_t, ChunkCost> costs_;  // by begin x (forward_ops + 1) + end
};

// Forward positions where each chunk starts, first 0, ascending.
using PipelineCut = std::vector<int>;

// The chunks' costs of a cut.
std::vector<ChunkCost> chunk_costs(const ChunkedGraph& chunked, const PipelineCut& cut);

// Megatron-LM's split: the layers evenly, ops before the first layer on the
// first chunk and those after the last on the last. Throws Error when the
// layers do not divide evenly (as Megatron-LM requires).
PipelineCut even_layer_cut(const ChunkedGraph& chunked, int chunks);

// What a pipeline partition is for: its devices and schedule, the links
// between them, and each device's budget.
struct PipelineShape {
  int devices = 1;
  int chunks_per_device = 1;
  int micro_batches = 1;
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  int devices_per_node = 1;
  P2pLink in_node;
  P2pLink across_nodes;
  // The replicas each device's optimizer states are sharded over (ZeRO-1;
  // 1: none), which the partition counts.
  int optimizer_shards = 1;
  // The replicas the expert-parallel experts' optimizer states are sharded
  // over (d / e; 0: optimizer_shards).
  int expert_optimizer_shards = 0;
  // ZeRO over the optimizer_shards replicas (Note [ZeRO in a pipeline
  // stage] in src/sim/pipeline_zero.cc): 0 or 1 as optimizer_shards says,
  // 2 the gradients sharded too, 3 the parameters too.
  int zero_stage = 0;
  // The optimizer states in host memory (Note [Offload in a pipeline
  // stage] in src/planner/pipeline_plan.cc), which the partition leaves out
  // of a device's bytes.
  bool optimizer_on_host = false;
  // Activations swapped to the host between forward and backward (Note
  // [Swapped activations in a pipeline stage] in src/sim/pipeline.cc).
  bool swap_activations = false;
};

// A rank's share of `bytes` sharded `shards` ways (at least 1), rounded up.
uint64_t shard_bytes(uint64_t bytes, int shards);

// A chunk's states with its optimizer states sharded `shards` ways, the
// experts' `expert_shards` ways (0: `shards`), each rank's share rounded up.
uint64_t sharded_states(const ChunkCost& c, int shards, int expert_shards = 0);

// A chunk's memory under the shape's ZeRO stage (Note [ZeRO in a pipeline
// stage]): its states, gradients and optimizer states a replica's shard,
// and the units gathered or reduced while its passes run added to its
// peaks. Stages 0 and 1 shard as sharded_states does.
ChunkCost zero_stage_memory(ChunkCost c, const PipelineShape& shape);

// A PipelineSetup of these chunks.
PipelineSetup pipeline_setup(const PipelineShape& shape, std::vector<ChunkCost> chunks);

// Names the chunk's first forward op, for tables.
std::string chunk_first_op(const ChunkedGraph& chunked, const PipelineCut& cut, int chunk);

}  // namespace memwall
