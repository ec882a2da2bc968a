// Note [ZeRO in a pipeline stage] (src/sim/pipeline_zero.cc): a chunk's
// shards and gathered units under ZeRO stages 2 and 3, exactly, and the
// plan's time for them.
//
// The model: Llama at a small shape (4 layers, h 256, 8 query heads of 32
// with 2 key-value heads, SwiGLU width 512, vocabulary 1,000), bf16, Adam.
// A layer holds wq and wo (256 x 256 each), wk and wv (256 x 64 each), w1,
// w3 and w2 (256 x 512 each) and two RMSNorm weights of 256: 557,568
// parameters, 1,115,136 bf16 bytes, the largest unit (the embedding and the
// head have 256,000 each).
#include <gtest/gtest.h>

#include <cstdint>

#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/planner/pipeline_layout.h"
#include "memwall/planner/pipeline_plan.h"
#include "memwall/sim/pipeline_chunks.h"
#include "zoo_models.h"

namespace memwall {
namespace {

Graph zero_llama() { return build_model("llama2-7b", small_llama_options(2, 512)); }

constexpr uint64_t kLayerBytes = 2 * (2 * 256 * 256 + 2 * 256 * 64 + 3 * 256 * 512 + 2 * 256);

TEST(PipelineZero, ALayerIsTheLargestUnit) {
  EXPECT_EQ(kLayerBytes, 1115136u);
  const Graph g = zero_llama();
  const ChunkedGraph chunked(g, find_gpu("h100-80g"));
  const ChunkCost whole = chunked.cost(0, chunked.forward_ops());
  EXPECT_EQ(whole.largest_unit_params, kLayerBytes);
  // bf16 gradients, one a parameter (the zoo's mixed precision keeps the
  // fp32 master weights among the optimizer states).
  EXPECT_EQ(whole.largest_unit_grads, kLayerBytes);
}

// Stage 2 keeps the parameters whole and a 1/R share of the gradients and
// the optimizer states, each rounded up, and holds one unit's whole
// gradient in backward; stage 3 shards the parameters too and holds two
// units' parameters in forward, two and a gradient in backward.
TEST(PipelineZero, ShardsAndGatheredUnits) {
  ChunkCost c;
  c.grads = 1000;
  c.optimizer_states = 4001;
  c.states = 3000 + c.grads + c.optimizer_states;  // parameters 3,000
  c.forward_peak = 500;
  c.backward_peak = 700;
  c.largest_unit_params = 100;
  c.largest_unit_grads = 90;
  PipelineShape shape;
  shape.optimizer_shards = 8;
  shape.zero_stage = 2;
  const ChunkCost two = zero_stage_memory(c, shape);
  EXPECT_EQ(two.grads, 125u);
  EXPECT_EQ(two.optimizer_states, 501u);  // 4,001 / 8 rounded up
  EXPECT_EQ(two.states, 3000u + 125 + 501);
  EXPECT_EQ(two.forward_peak, 500u);
  EXPECT_EQ(two.backward_peak, 700u + 90);
  shape.zero_stage = 3;
  const ChunkCost three = zero_stage_memory(c, shape);
  EXPECT_EQ(three.states, 375u + 125 + 501);
  EXPECT_EQ(three.forward_peak, 500u + 200);
  EXPECT_EQ(three.backward_peak, 700u + 200 + 90);
  shape.zero_stage = 1;
  const ChunkCost one = zero_stage_memory(c, shape);
  EXPECT_EQ(one.states, 3000u + 1000 + 501);
  EXPECT_EQ(one.backward_peak, 700u);
}

// In a plan: the states the shards say, no step-end reduction under stage 3
// (every micro-batch reduced its own), the updated parameters gathered
// after the step under stage 2, and passes no shorter than without.
TEST(PipelineZero, PlansShardOverTheReplicas) {
  const Graph g = zero_llama();
  const Hardware& node = find_gpu("h100-80g");
  PipelineRequest request{.devices = 2,
                          .data_parallel = 4,
                          .distributed_optimizer = true,
                          .micro_batches = 4,
                          .partition = PipelinePartition::kEvenLayers};
  const PipelinePlan one = plan_pipeline(g, node, request);
  request.zero_stage = 2;
  const PipelinePlan two = plan_pipeline(g, node, request);
  request.zero_stage = 3;
  const PipelinePlan three = plan_pipeline(g, node, request);
  EXPECT_EQ(one.zero_stage, 1);
  EXPECT_EQ(three.zero_stage, 3);
  const ChunkedGraph chunked(g, node);
  const std::vector<ChunkCost> raw = chunk_costs(chunked, one.cut);
  for (size_t k = 0; k < raw.size(); ++k) {
    const uint64_t params = raw[k].states - raw[k].grads - raw[k].optimizer_states;
    const auto quarter = [](uint64_t bytes) { return (bytes + 3) / 4; };
    EXPECT_EQ(two.costs[k].states,
              params + quarter(raw[k].grads) + quarter(raw[k].optimizer_states));
    EXPECT_EQ(three.costs[k].states,
              quarter(params) + quarter(raw[k].grads) + quarter(raw[k].optimizer_states));
    EXPECT_EQ(three.costs[k].grad_sync, 0);
    EXPECT_GT(two.costs[k].grad_sync, 0);
    EXPECT_GE(three.costs[k].forward, raw[k].forward);
    EXPECT_GE(three.costs[k].backward, raw[k].backward);
    EXPECT_EQ(three.costs[k].forward_peak, raw[k].forward_peak + 2 * raw[k].largest_unit_params);
  }
  for (size_t d = 0; d < one.sim.devices.size(); ++d) {
    EXPECT_LT(two.sim.devices[d].states, one.sim.devices[d].states);
    EXPECT_LT(three.sim.devices[d].states, two.sim.devices[d].states);
  }
}

// Note [Offload in a pipeline stage]: the optimizer states leave the
// device for the host, and the step is the gradients' copy down, the CPU's
// step of the parameters at the node's rate shared by its GPUs, and the
// parameters' copy up; the node's ranks hold the host bytes together.
TEST(PipelineZero, OffloadedOptimizerStepsOnTheHost) {
  const Graph g = zero_llama();
  Hardware node = find_gpu("h100-80g");
  PipelineRequest request{
      .devices = 2, .micro_batches = 4, .partition = PipelinePartition::kEvenLayers};
  request.offload_optimizer = true;
  const PipelinePlan plan = plan_pipeline(g, node, request);
  ASSERT_TRUE(plan.offload_optimizer);
  const ChunkedGraph chunked(g, node);
  const std::vector<ChunkCost> raw = chunk_costs(chunked, plan.cut);
  const Hardware rank = rank_share(node, 2);  // 2 GPUs, on one node
  uint64_t most = 0;
  for (size_t k = 0; k < raw.size(); ++k) {
    const ChunkCost& c = plan.costs[k];
    const uint64_t params = raw[k].states - raw[k].grads - raw[k].optimizer_states;
    EXPECT_EQ(c.host_states, raw[k].optimizer_states);
    EXPECT_EQ(c.states, raw[k].states - raw[k].optimizer_states);
    EXPECT_DOUBLE_EQ(c.optimizer,
                     d2h_time(rank, raw[k].grads) +
                         static_cast<double>(raw[k].param_elements) / rank.cpu_adam_params_per_s +
                         h2d_time(rank, params));
    EXPECT_EQ(plan.sim.devices[k].host_states, c.host_states);
    most = std::max(most, c.host_states);
  }
  EXPECT_EQ(plan.host_bytes_per_node, 2 * most);
  EXPECT_TRUE(plan.host_fits);
  node.host_memory_bytes = 2 * most - 1;
  const PipelinePlan over = plan_pipeline(g, node, request);
  EXPECT_FALSE(over.host_fits);
  EXPECT_FALSE(over.fits);
}

// Note [Swapped activations in a pipeline stage]: 1F1B holds 4
// micro-batches on the first of 4 devices, so while a pass runs 3 others'
// saved bytes are in flight; with swapping 2 stay and 1 is on the host. The
// copies cost what a pass of the chunk's length does not hide.
TEST(PipelineZero, SwappedActivationsKeepTwoMicroBatchesOnTheDevice) {
  const Graph g = zero_llama();
  const Hardware& node = find_gpu("h100-80g");
  PipelineRequest request{
      .devices = 4, .micro_batches = 8, .partition = PipelinePartition::kEvenLayers};
  const PipelinePlan kept = plan_pipeline(g, node, request);
  request.swap_activations = true;
  const PipelinePlan swapped = plan_pipeline(g, node, request);
  ASSERT_TRUE(swapped.swap_activations);
  const Hardware rank = rank_share(node, 4);
  for (size_t k = 0; k < kept.costs.size(); ++k) {
    const ChunkCost& a = kept.costs[k];
    const ChunkCost& b = swapped.costs[k];
    EXPECT_DOUBLE_EQ(b.forward, a.forward + std::max(0.0, d2h_time(rank, a.saved) - a.forward));
    EXPECT_DOUBLE_EQ(b.backward, a.backward + std::max(0.0, h2d_time(rank, a.saved) - a.backward));
  }
  EXPECT_EQ(kept.sim.devices[0].max_in_flight, 4);
  EXPECT_EQ(swapped.sim.devices[0].host_activations, kept.costs[0].saved);
  EXPECT_EQ(swapped.sim.devices[0].peak_bytes,
            kept.sim.devices[0].peak_bytes - kept.costs[0].saved);
  EXPECT_EQ(swapped.sim.devices[3].host_activations, 0u);  // 1 in flight: nothing to swap
  EXPECT_EQ(swapped.host_bytes_per_node, 4 * kept.costs[0].saved);
}

// Note [Layout search]: where no recomputation fits under ZeRO-1, the
// search tries ZeRO-3 (then offload): with a budget of exactly ZeRO-3's
// peak for 4 replicas, per-layer recomputation, ZeRO-1 fits nowhere and
// ZeRO-3 is chosen.
TEST(PipelineZero, TheLayoutSearchFallsBackToZero3) {
  const Hardware& node = find_gpu("h100-80g");
  const ModelOptions o = small_llama_options(1, 512);
  const Graph g = build_model("llama2-7b", o);
  const ChunkedGraph chunked(g, node, ChunkRecompute::kFullLayers);
  const PipelinePlan three = plan_pipeline(chunked, node,
                                           {.devices = 1,
                                            .data_parallel = 4,
                                            .distributed_optimizer = true,
                                            .zero_stage = 3,
                                            .micro_batches = 2,
                                            .recompute = ChunkRecompute::kFullLayers});
  const uint64_t budget = three.sim.devices.at(0).peak_bytes;
  const LayoutSearch search = search_layouts("llama2-7b", o, node,
                                             {.gpus = 4,
                                              .global_batch = 8,
                                              .budget = budget,
                                              .tensor_parallel = 1,
                                              .pipeline_parallel = 1});
  ASSERT_TRUE(search.best.has_value());
  EXPECT_EQ(search.best->zero_stage, 3);
  EXPECT_EQ(search.best->sim.devices.at(0).peak_bytes, budget);
  EXPECT_NE(layout_label(search.candidates.front()).find(", ZeRO-3"), std::string::npos);
  for (const LayoutCandidate& c : search.candidates) {
    if (c.zero_stage <= 1 && !c.offload_optimizer) {
      EXPECT_FALSE(c.fits) << layout_label(c);
    }
  }
}

}  // namespace
}  // namespace memwall
