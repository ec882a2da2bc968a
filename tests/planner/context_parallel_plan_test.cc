// Note [Context parallelism in the zoo] in a pipeline: what a
// context-parallel rank's chunks hold and cost, and a pipeline plan's
// context-parallel ranks (Note [Layout search]).
//
// The model: Llama at a small shape (4 layers, h 256, 8 query heads of 32
// with 2 key-value heads, SwiGLU width 512, vocabulary 1,000), bf16,
// batch 2, with --flash.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/planner/pipeline_plan.h"
#include "memwall/sim/pipeline_chunks.h"
#include "zoo_models.h"

namespace memwall {
namespace {

Graph cp_plan_llama(int64_t seq, int64_t c) {
  ModelOptions o = small_llama_options(2, seq);
  o.context_parallel = c;
  return build_model("llama2-7b", o);
}

// What a rank keeps from its forward to its backward is what the model
// keeps at s/c positions without context parallelism: the ring saves q,
// the packed k and v (their bytes; k and v themselves die once packed), the
// output and its log-sum-exp, as flash attention saves q, k, v, the output
// and the log-sum-exp. The rank's parameters are the whole model's.
TEST(ContextParallelPipeline, SavesWhatTheModelSavesAtItsShareOfTheSequence) {
  const Hardware& node = find_gpu("h100-80g");
  for (const int64_t c : {2, 4}) {
    SCOPED_TRACE(testing::Message() << "c " << c);
    const int64_t s = 2048;
    const Graph rank = cp_plan_llama(s, c);
    const Graph share = cp_plan_llama(s / c, 1);
    const ChunkedGraph rank_chunks(rank, node);
    const ChunkedGraph share_chunks(share, node);
    const ChunkCost a = rank_chunks.cost(0, rank_chunks.forward_ops());
    const ChunkCost b = share_chunks.cost(0, share_chunks.forward_ops());
    EXPECT_EQ(a.saved, b.saved);
    EXPECT_EQ(a.states, b.states);

  }
}

// A pipeline chunk counts of a ring exchange only what the kernel beside it
// does not hide: its forward is at least its kernels' and at most every
// op's seconds.
TEST(ContextParallelPipeline, ChunksHideRingExchangesBehindKernels) {
  const Hardware& node = find_gpu("h100-80g");
  const Graph g = cp_plan_llama(2048, 4);
  const ChunkedGraph chunks(g, node);
  const ChunkCost cost = chunks.cost(0, chunks.forward_ops());
  double all = 0, kernels = 0;
  for (const Op& op : g.ops) {
    if (chunks.anchor(op.id) < 0 || op.phase == Phase::kOptimizer) continue;
    if (op.id > chunks.forward_op(chunks.forward_ops() - 1)) continue;
    const double t = op_time(node, g, op);
    all += t;
    if (op.type != "cp_send_recv") kernels += t;
  }
  EXPECT_LT(cost.forward, all);
  EXPECT_GE(cost.forward, kernels * (1 - 1e-12));
}

// A pipeline of c context-parallel ranks: c times the GPUs, the
// gradients reduced over the d x c ranks that hold the same parameters (so
// d = 2, c = 2 syncs as d = 4 without it: the same group and bytes), and
// the tokens of d replicas of b x s positions a micro-batch, not d x c.
TEST(ContextParallelPipeline, GradientsReduceOverDataAndContextRanks) {
  const Hardware& node = find_gpu("h100-80g");
  const PipelineRequest request{.devices = 2,
                                .data_parallel = 2,
                                .micro_batches = 4,
                                .partition = PipelinePartition::kEvenLayers};
  PipelineRequest four = request;
  four.data_parallel = 4;
  const PipelinePlan with_cp = plan_pipeline(cp_plan_llama(2048, 2), node, request);
  const PipelinePlan without = plan_pipeline(cp_plan_llama(2048, 1), node, four);
  EXPECT_EQ(with_cp.context_parallel, 2);
  EXPECT_EQ(with_cp.gpus, 2 * 2 * 2);
  ASSERT_EQ(with_cp.costs.size(), without.costs.size());
  for (size_t k = 0; k < with_cp.costs.size(); ++k) {
    EXPECT_EQ(with_cp.costs[k].grads, without.costs[k].grads);
    EXPECT_GT(with_cp.costs[k].grad_sync, 0);
    EXPECT_DOUBLE_EQ(with_cp.costs[k].grad_sync, without.costs[k].grad_sync);
  }
  EXPECT_DOUBLE_EQ(with_cp.tokens_per_s, 2.0 * 4 * 2 * 2048 / with_cp.sim.step_time);
  EXPECT_DOUBLE_EQ(with_cp.samples_per_s, 2.0 * 4 * 2 / with_cp.sim.step_time);
}

}  // namespace
}  // namespace memwall
