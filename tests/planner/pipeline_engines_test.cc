// Pipelines of a mixture of experts under expert parallelism (Note [Expert
// parallelism in the zoo]), the layout search's expert-parallel layouts,
// and torch.distributed.pipelining's memory (Note [Pipeline engines] in
// src/sim/pipeline_chunks.cc).
#include <gtest/gtest.h>

#include <cstdint>

#include "memwall/base/error.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/planner/pipeline_layout.h"
#include "memwall/planner/pipeline_plan.h"

namespace memwall {
namespace {

// Mixtral 8x7B's expert: 3 x 4096 x 14,336 parameters (Hugging Face
// config.json of mistralai/Mixtral-8x7B-v0.1); bf16 mixed precision keeps
// 2-byte gradients and 12 bytes of fp32 optimizer states a parameter.
constexpr uint64_t kExpertParams = 176160768;

Graph mixtral_rank(int64_t e) {
  ModelOptions o;
  o.batch = 1;
  o.seq = 256;
  o.expert_parallel = e;
  return build_model("mixtral-8x7b", o);
}

// With e = d = 8 each expert lives on one replica: its gradients are synced
// with nobody and its optimizer states not sharded; the rest all-reduce
// over the 8 replicas.
TEST(PipelineExperts, ExpertsSyncOverTheReplicasHoldingThem) {
  const Graph g = mixtral_rank(8);
  const Hardware node = find_gpu("h100-80g");
  const PipelinePlan plan = plan_pipeline(
      g, node,
      {.devices = 4, .data_parallel = 8, .micro_batches = 4,
       .partition = PipelinePartition::kEvenLayers});
  EXPECT_EQ(plan.expert_parallel, 8);
  ASSERT_EQ(plan.costs.size(), 4u);
  for (const ChunkCost& c : plan.costs) {
    EXPECT_EQ(c.expert_grads, 8 * kExpertParams * 2);  // 8 layers, one expert each
    EXPECT_EQ(c.expert_optimizer_states, 8 * kExpertParams * 12);
    const double dense = static_cast<double>(c.grads - c.expert_grads);
    EXPECT_DOUBLE_EQ(c.grad_sync,
                     collective_time(node, Collective::kAllReduce, 2 * 7.0 / 8 * dense, 8));
  }
  // ZeRO-1: the dense states shard 8 ways, the experts' not at all.
  const PipelinePlan sharded = plan_pipeline(
      g, node,
      {.devices = 4, .data_parallel = 8, .distributed_optimizer = true, .micro_batches = 4,
       .partition = PipelinePartition::kEvenLayers});
  for (size_t k = 0; k < plan.costs.size(); ++k) {
    const ChunkCost& whole = plan.costs[k];
    const uint64_t dense = whole.optimizer_states - whole.expert_optimizer_states;
    EXPECT_EQ(sharded.costs[k].states,
              whole.states - whole.optimizer_states + (dense + 7) / 8 + whole.expert_optimizer_states);
  }
  // Expert-parallel ranks are data-parallel ones.
  EXPECT_THROW(plan_pipeline(g, node, {.devices = 4, .data_parallel = 4, .micro_batches = 4}),
               Error);
}

TEST(PipelineExperts, TheSearchSharesOutExpertsAmongReplicas) {
  const LayoutSearch search =
      search_layouts("mixtral-8x7b", {.seq = 256}, find_gpu("h100-80g"),
                     {.gpus = 16, .global_batch = 64, .pipeline_parallel = 2});
  bool expert_parallel = false;
  for (const LayoutCandidate& c : search.candidates) {
    EXPECT_EQ(c.data_parallel % c.expert_parallel, 0);
    EXPECT_EQ(8 % c.expert_parallel, 0);
    expert_parallel = expert_parallel || c.expert_parallel > 1;
  }
  EXPECT_TRUE(expert_parallel);
  ASSERT_TRUE(search.best.has_value());
  EXPECT_EQ(search.best->expert_parallel, search.candidates.front().expert_parallel);
  // Dense models have no experts to share out.
  const LayoutSearch dense = search_layouts("gpt2-small", {.seq = 128}, find_gpu("a100-80g"),
                                            {.gpus = 8, .global_batch = 16});
  for (const LayoutCandidate& c : dense.candidates) EXPECT_EQ(c.expert_parallel, 1);
}

// A 4-block GPT-2 (h 256, 4 heads, vocabulary 1024, fp32) of 2 x 64 tokens
// on 2 stages, 4 micro-batches of 1F1B: what crosses the cut is one
// [2, 64, 256] fp32 activation, X = 131,072 B. Under torch's pipelining the
// first stage keeps M gradient receive buffers (one was the backward's own
// under Megatron-LM) and caches its output for each of its 2 micro-batches
// in flight; the second keeps M activation receive buffers (its one in
// flight held one under Megatron-LM). Measured on 4 gloo processes in
// python/tests/test_parallel.py.
TEST(PipelineEngines, TorchKeepsReceiveBuffersAndCachedOutputs) {
  ModelOptions o;
  o.batch = 2;
  o.seq = 64;
  o.precision = Precision::kFp32;
  o.tensor_parallel = 2;
  o.shape = {.layers = 4, .hidden = 256, .heads = 4, .vocab = 1024, .positions = 64};
  const Graph g = build_model("gpt2-small", o);
  PipelineRequest request{.devices = 2, .micro_batches = 4,
                          .partition = PipelinePartition::kEvenLayers};
  const PipelinePlan megatron = plan_pipeline(g, find_gpu("a100-80g"), request);
  request.engine = PipelineEngine::kTorch;
  const PipelinePlan torch = plan_pipeline(g, find_gpu("a100-80g"), request);
  const uint64_t x = 131072, m = 4;
  ASSERT_EQ(megatron.costs[0].send_forward, x);
  EXPECT_EQ(torch.engine, PipelineEngine::kTorch);
  EXPECT_EQ(torch.sim.devices[0].engine_buffers, m * x);
  EXPECT_EQ(torch.sim.devices[1].engine_buffers, m * x);
  EXPECT_EQ(torch.sim.devices[0].max_in_flight, 2);
  EXPECT_EQ(torch.sim.devices[0].peak_bytes, megatron.sim.devices[0].peak_bytes + (m - 1) * x + 2 * x);
  EXPECT_EQ(torch.sim.devices[1].peak_bytes, megatron.sim.devices[1].peak_bytes + (m - 1) * x);
  EXPECT_EQ(torch.sim.devices[0].peak_bytes, 22338560u);
  EXPECT_EQ(torch.sim.devices[1].peak_bytes, 19260416u);
  EXPECT_EQ(torch.costs[0].saved, megatron.costs[0].saved + x);
  EXPECT_EQ(torch.costs[1].saved, megatron.costs[1].saved - x);
}

// Korthikanti et al. 2022, Table 2: with tensor and sequence parallelism
// and selective recomputation a layer saves 34sbh/t bytes (plus PyTorch's
// LayerNorm statistics, 16sb/t: tests/models/tensor_parallel_test.cc),
// where keeping everything saves sbh/t (34 + 5as/h): selective drops
// exactly 5as^2b/t a layer, and each layer's backward reruns QK^T, the
// softmax and the attention dropout (3 ops, as docs/remat-selective.md's
// planner).
TEST(PipelineChunks, SelectiveRecomputationIsKorthikantisTable2) {
  const int64_t s = 1024, b = 1, h = 768, a = 12, t = 4, layers = 12;
  ModelOptions o;
  o.batch = b;
  o.seq = s;
  o.tensor_parallel = t;
  o.sequence_parallel = true;
  const Graph g = build_model("gpt2-small", o);
  const Hardware hw = find_gpu("a100-80g");
  PipelineRequest request{.devices = 2, .micro_batches = 2,
                          .partition = PipelinePartition::kEvenLayers};
  const PipelinePlan keep = plan_pipeline(g, hw, request);
  request.recompute = ChunkRecompute::kSelective;
  const PipelinePlan selective = plan_pipeline(g, hw, request);
  const uint64_t per_layer_kept = 34 * s * b * h / t + 16 * s * b / t;
  const uint64_t per_layer_dropped = 5 * a * s * s * b / t;
  EXPECT_EQ(per_layer_kept, 6688768u);
  for (int k = 0; k < 2; ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(keep.costs[k].saved - selective.costs[k].saved, layers / 2 * per_layer_dropped);
    EXPECT_EQ(selective.costs[k].states, keep.costs[k].states);
  }
  // The reruns' seconds: each layer's scores, softmax and dropout once more.
  double rerun = 0;
  for (const Op& op : g.ops) {
    if (op.name.ends_with(".attn.scores") || op.name.ends_with(".attn.softmax") ||
        op.name.ends_with(".attn.probs_dropout")) {
      rerun += op_time(hw, g, op);
    }
  }
  EXPECT_NEAR(selective.costs[0].backward + selective.costs[1].backward,
              keep.costs[0].backward + keep.costs[1].backward + rerun, 1e-12);
  EXPECT_EQ(to_string(ChunkRecompute::kSelective), "selective");
  EXPECT_EQ(parse_chunk_recompute("selective"), ChunkRecompute::kSelective);
}

// Korthikanti et al. 2022's evaluation models (their Table 3: 22B, 175B,
// 530B, 1T; t = 8, s = 2048, b = 1) under each technique: one layer's
// saved bytes (the difference between 3 and 2 layers) are their Table 2's
// formulas, plus PyTorch's LayerNorm statistics (16sb, 16sb/t with
// sequence parallelism), exactly. bench/korthikanti_memory.py prints the
// table docs/pipeline.md shows.
TEST(PipelineChunks, KorthikantisEvaluationModelsLayerByLayer) {
  struct Model {
    uint64_t h, a;
  };
  const uint64_t s = 2048, b = 1, t = 8;
  const Hardware hw = find_gpu("a100-80g");
  for (const Model m : {Model{6144, 64}, Model{12288, 96}, Model{20480, 128}, Model{25600, 160}}) {
    SCOPED_TRACE(m.h);
    const auto per_layer = [&](bool sequence, ChunkRecompute recompute) {
      uint64_t saved[2];
      for (const int64_t layers : {2, 3}) {
        ModelOptions o;
        o.batch = b;
        o.seq = s;
        o.tensor_parallel = t;
        o.sequence_parallel = sequence;
        o.shape = {.layers = layers, .hidden = static_cast<int64_t>(m.h),
                   .heads = static_cast<int64_t>(m.a), .vocab = 51200, .positions = 2048};
        const Graph g = build_model("gpt2-small", o);
        saved[layers - 2] =
            plan_pipeline(g, hw, {.devices = 1, .recompute = recompute}).costs.at(0).saved;
      }
      return saved[1] - saved[0];
    };
    const uint64_t sbh = s * b * m.h, attention = 5 * m.a * s * s * b / t;
    EXPECT_EQ(per_layer(false, ChunkRecompute::kNone), sbh * (10 + 24 / t) + attention + 16 * s * b);
    EXPECT_EQ(per_layer(true, ChunkRecompute::kNone), 34 * sbh / t + attention + 16 * s * b / t);
    EXPECT_EQ(per_layer(false, ChunkRecompute::kSelective), sbh * (10 + 24 / t) + 16 * s * b);
    EXPECT_EQ(per_layer(true, ChunkRecompute::kSelective), 34 * sbh / t + 16 * s * b / t);
    EXPECT_EQ(per_layer(true, ChunkRecompute::kFullLayers), 2 * sbh / t);
  }
}

}  // namespace
}  // namespace memwall
