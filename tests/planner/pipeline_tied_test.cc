// A parameter two pipeline chunks hold: GPT-2's tied word embedding, in
// the first chunk's lookup and the last chunk's head. Its gradient is
// all-reduced between the first and the last stage after the last
// backward (Megatron-LM's embedding group), timed as a ring of 2.
//
// GPT-2 small (Hugging Face's gpt2 config.json): vocabulary 50,257, h 768;
// the embedding's gradient is 50,257 x 768 bf16 values, 77,194,752 bytes.
#include <gtest/gtest.h>

#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/planner/pipeline_plan.h"

namespace memwall {
namespace {

TEST(PipelineTiedEmbedding, FirstAndLastStageAllReduceItsGradient) {
  ModelOptions o;
  o.batch = 1;
  o.seq = 128;
  const Graph g = build_model("gpt2-small", o);
  const Hardware& node = find_gpu("h100-80g");
  const PipelinePlan plan = plan_pipeline(
      g, node, {.devices = 2, .micro_batches = 2, .partition = PipelinePartition::kEvenLayers});
  ASSERT_EQ(plan.costs.size(), 2u);
  const uint64_t wte = uint64_t{50257} * 768 * 2;
  const double ends = collective_time(node, Collective::kAllReduce, static_cast<double>(wte),
                                      CollectiveGroup{2, 2});
  for (const ChunkCost& c : plan.costs) {
    EXPECT_EQ(c.shared_grads, wte);
    EXPECT_DOUBLE_EQ(c.grad_sync, ends);  // no data-parallel replicas
  }
  // One device holds both ends: nothing to reduce.
  const PipelinePlan one = plan_pipeline(
      g, node, {.devices = 1, .micro_batches = 2, .partition = PipelinePartition::kEvenLayers});
  EXPECT_EQ(one.costs.at(0).shared_grads, 0u);
  EXPECT_EQ(one.costs.at(0).grad_sync, 0);
}

}  // namespace
}  // namespace memwall
