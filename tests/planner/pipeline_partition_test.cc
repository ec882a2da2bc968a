// Note [Pipeline chunks] and Note [Pipeline partitioning]: exact bytes,
// seconds and transfers of hand-built chunks, whose figures the comments
// derive op by op, and invariants of the zoo's GPT-2 cut into stages.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <string>

#include "../graph/graph_builder.h"
#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/planner/pipeline_layout.h"
#include "memwall/planner/pipeline_partition.h"
#include "memwall/planner/pipeline_plan.h"
#include "memwall/sim/pipeline_chunks.h"

namespace memwall {
namespace {

using testing::GraphBuilder;

// Three layers and a loss; times set on every op.
//   h0.fc   in [x, w0] out [a0] (workspace 5)    h0.fc.bwd in [da0, x, w0] out [g0] (workspace 7)
//   h1.fc   in [a0, w1] out [a1]                 h1.fc.bwd in [da1, a0, w1] out [da0, g1]
//   h2.fc   in [a1, w2] out [a2]                 h2.fc.bwd in [da2, a1, w2] out [da1, g2]
//   loss    in [a2] out [loss]                   loss.bwd  in [loss, a2] out [da2]
// Bytes: x 10; w, g 100; m 200; a0 20, a1 40, a2 80, loss 1; da_i as a_i.
Graph three_layer_pipeline_graph() {
  GraphBuilder g;
  const BufferId x = g.buffer("x", 10, BufferKind::kInput);
  std::vector<BufferId> w;
  std::vector<BufferId> grad;
  std::vector<BufferId> m;
  for (int i = 0; i < 3; ++i) w.push_back(g.buffer("w" + std::to_string(i), 100, BufferKind::kParam));
  const BufferId a0 = g.buffer("a0", 20, BufferKind::kActivation);
  const BufferId a1 = g.buffer("a1", 40, BufferKind::kActivation);
  const BufferId a2 = g.buffer("a2", 80, BufferKind::kActivation);
  const BufferId loss = g.buffer("loss", 1, BufferKind::kActivation);
  const BufferId da2 = g.buffer("da2", 80, BufferKind::kTemp);
  const BufferId da1 = g.buffer("da1", 40, BufferKind::kTemp);
  const BufferId da0 = g.buffer("da0", 20, BufferKind::kTemp);
  for (int i = 0; i < 3; ++i) grad.push_back(g.buffer("g" + std::to_string(i), 100, BufferKind::kGrad));
  for (int i = 0; i < 3; ++i) m.push_back(g.buffer("m" + std::to_string(i), 200, BufferKind::kOptimState));
  g.op("h0.fc", Phase::kForward, {x, w[0]}, {a0}, {}, 5);
  g.op("h1.fc", Phase::kForward, {a0, w[1]}, {a1});
  g.op("h2.fc", Phase::kForward, {a1, w[2]}, {a2});
  g.op("loss", Phase::kForward, {a2}, {loss});
  g.op("loss.bwd", Phase::kBackward, {loss, a2}, {da2});
  g.op("h2.fc.bwd", Phase::kBackward, {da2, a1, w[2]}, {da1, grad[2]});
  g.op("h1.fc.bwd", Phase::kBackward, {da1, a0, w[1]}, {da0, grad[1]});
  g.op("h0.fc.bwd", Phase::kBackward, {da0, x, w[0]}, {grad[0]}, {}, 7);
  for (int i = 0; i < 3; ++i) {
    g.op("w" + std::to_string(i) + ".step", Phase::kOptimizer, {grad[i]}, {}, {w[i], m[i]});
  }
  const double times[] = {1, 1, 1, 0.5, 0.5, 2, 2, 2, 0.25, 0.25, 0.25};
  for (size_t i = 0; i < g.graph.ops.size(); ++i) g.graph.ops[i].time = times[i];
  validate(g.graph);
  return g.graph;
}

Hardware pipeline_gpu() { return find_gpu("a100-80g"); }

TEST(PipelineChunks, BackwardOpsFollowTheirForwardOps) {
  const Graph graph = three_layer_pipeline_graph();
  const Hardware hw = pipeline_gpu();
  const ChunkedGraph chunked(graph, hw);
  EXPECT_EQ(chunked.forward_ops(), 4);
  // loss.bwd, h2.fc.bwd, h1.fc.bwd, h0.fc.bwd; then the steps by parameter.
  const std::vector<int> anchors = {3, 2, 1, 0, 0, 1, 2};
  for (OpId op = 4; op < 11; ++op) EXPECT_EQ(chunked.anchor(op), anchors[op - 4]) << op;
  EXPECT_EQ(chunked.cut_points(false), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(chunked.cut_points(true), (std::vector<int>{0, 1, 2, 3}));
}

TEST(PipelineChunks, ExactBytesSecondsAndTransfers) {
  const Graph graph = three_layer_pipeline_graph();
  const Hardware hw = pipeline_gpu();
  const ChunkedGraph chunked(graph, hw);
  const std::vector<ChunkCost> costs = chunk_costs(chunked, {0, 2});
  ASSERT_EQ(costs.size(), 2u);
  // Chunk 0 runs h0.fc, h1.fc, h1.fc.bwd, h0.fc.bwd and two steps. Live:
  // x 10 and a0 20 (both read again in backward), then a1 40 until it is
  // sent: 35 with h0's workspace, 70; in backward the received da1 40 and
  // da0 20 beside x and a0: 90, then x, da0 and the workspace 7: 37.
  const ChunkCost& first = costs[0];
  EXPECT_EQ(first.states, 2u * (100 + 100 + 200));
  EXPECT_EQ(first.grads, 200u);
  EXPECT_EQ(first.saved, 30u);
  EXPECT_EQ(first.forward_peak, 70u);
  EXPECT_EQ(first.backward_peak, 90u);
  EXPECT_EQ(first.optimizer_peak, 0u);
  EXPECT_EQ(first.forward, 2);
  EXPECT_EQ(first.backward, 4);
  EXPECT_EQ(first.optimizer, 0.5);
  EXPECT_EQ(first.send_forward, 40u);  // a1
  EXPECT_EQ(first.send_backward, 0u);
  // Chunk 1 runs h2.fc, loss, loss.bwd, h2.fc.bwd and w2's step: the
  // received a1 40 with a2 80 (120), the loss 1 (121, all of it saved), da2
  // 80 (201), then a1, da2 and da1 40 (160).
  const ChunkCost& last = costs[1];
  EXPECT_EQ(last.states, 400u);
  EXPECT_EQ(last.grads, 100u);
  EXPECT_EQ(last.saved, 121u);
  EXPECT_EQ(last.forward_peak, 121u);
  EXPECT_EQ(last.backward_peak, 201u);
  EXPECT_EQ(last.forward, 1.5);
  EXPECT_EQ(last.backward, 2.5);
  EXPECT_EQ(last.optimizer, 0.25);
  EXPECT_EQ(last.send_forward, 0u);
  EXPECT_EQ(last.send_backward, 40u);  // da1
  EXPECT_EQ(chunked.forward_crossing(1), 20u);   // a0
  EXPECT_EQ(chunked.backward_crossing(1), 20u);  // da0
  EXPECT_EQ(chunked.backward_crossing(3), 80u);  // da2
}

// Note [Pipeline recomputation]: an embedding, two layers of two ops whose
// first output the layer's backward reads again, and a loss.
//   emb     in [x, we] out [e]          emb.bwd    in [de, x] out [gwe]
//   h0.fc   in [e, w0] out [u0]         h0.fc.bwd  in [du0, e, w0] out [de, g0]
//   h0.act  in [u0] out [o0]            h0.act.bwd in [do0, u0] out [du0]
//   h1.fc   in [o0, w1] out [u1]        h1.fc.bwd  in [du1, o0, w1] out [do0, g1]
//   h1.act  in [u1] out [o1]            h1.act.bwd in [do1, u1] out [du1]
//   loss    in [o1] out [loss]          loss.bwd   in [loss] out [do1]
// Bytes: x 4; e, o_i, do_i, de 10; u_i, du_i 30; loss 1; parameters and
// gradients 100, optimizer states 200. Forward ops take 1 s (the loss 0.5),
// backward ops 2 s.
Graph two_layer_recompute_graph() {
  GraphBuilder g;
  const BufferId x = g.buffer("x", 4, BufferKind::kInput);
  std::vector<BufferId> w, grad, m;
  for (const char* name : {"we", "w0", "w1"}) {
    w.push_back(g.buffer(name, 100, BufferKind::kParam));
    grad.push_back(g.buffer(std::string("g") + name, 100, BufferKind::kGrad));
    m.push_back(g.buffer(std::string("m") + name, 200, BufferKind::kOptimState));
  }
  const auto act = [&](const char* name, uint64_t bytes) {
    return g.buffer(name, bytes, BufferKind::kActivation);
  };
  const BufferId e = act("e", 10), u0 = act("u0", 30), o0 = act("o0", 10);
  const BufferId u1 = act("u1", 30), o1 = act("o1", 10), loss = act("loss", 1);
  const auto temp = [&](const char* name, uint64_t bytes) {
    return g.buffer(name, bytes, BufferKind::kTemp);
  };
  const BufferId do1 = temp("do1", 10), du1 = temp("du1", 30), do0 = temp("do0", 10);
  const BufferId du0 = temp("du0", 30), de = temp("de", 10);
  g.op("emb", Phase::kForward, {x, w[0]}, {e});
  g.op("h0.fc", Phase::kForward, {e, w[1]}, {u0});
  g.op("h0.act", Phase::kForward, {u0}, {o0});
  g.op("h1.fc", Phase::kForward, {o0, w[2]}, {u1});
  g.op("h1.act", Phase::kForward, {u1}, {o1});
  g.op("loss", Phase::kForward, {o1}, {loss});
  g.op("loss.bwd", Phase::kBackward, {loss}, {do1});
  g.op("h1.act.bwd", Phase::kBackward, {do1, u1}, {du1});
  g.op("h1.fc.bwd", Phase::kBackward, {du1, o0, w[2]}, {do0, grad[2]});
  g.op("h0.act.bwd", Phase::kBackward, {do0, u0}, {du0});
  g.op("h0.fc.bwd", Phase::kBackward, {du0, e, w[1]}, {de, grad[1]});
  g.op("emb.bwd", Phase::kBackward, {de, x}, {grad[0]});
  for (int i = 0; i < 3; ++i) {
    g.op("step" + std::to_string(i), Phase::kOptimizer, {grad[i]}, {}, {w[i], m[i]});
  }
  for (Op& op : g.graph.ops) {
    op.time = op.phase == Phase::kForward ? 1 : op.phase == Phase::kBackward ? 2 : 0.25;
  }
  g.graph.ops[5].time = 0.5;  // the loss
  validate(g.graph);
  return g.graph;
}

// One chunk of the whole graph. Without recomputation it saves x, e, u0,
// o0, u1 and the loss (85 B), its forward peaks at the loss (95 B) and its
// backward at h1.act.bwd (the saved 84 without the loss, do1 and du1: 124).
// With it, u0 and u1 (made and read only inside their layers) die after
// their forward use: x, e, o0 and the loss are saved (25 B); o0 and o1,
// which other layers or the loss read, stay. The forward peaks at h1.act
// (x, e, o0, u1, o1: 64 B). Before h1.act.bwd, the first to read u1, h1
// reruns: x, e, o0, do1 with u1' (64), o1' (74), then du1 (94, the peak);
// h0 reruns before h0.act.bwd: x, e, do0, u0' (54), o0' (64), du0 (84).
// The reruns add their 4 forward seconds to the backward's 12.
TEST(PipelineChunks, FullRecomputationKeepsEachLayersInput) {
  const Graph graph = two_layer_recompute_graph();
  const Hardware hw = pipeline_gpu();
  const ChunkedGraph keep(graph, hw);
  const ChunkCost kept = keep.cost(0, keep.forward_ops());
  EXPECT_EQ(kept.saved, 85u);
  EXPECT_EQ(kept.forward_peak, 95u);
  EXPECT_EQ(kept.backward_peak, 124u);
  EXPECT_EQ(kept.forward, 5.5);
  EXPECT_EQ(kept.backward, 12);

  const ChunkedGraph rerun(graph, hw, ChunkRecompute::kFullLayers);
  EXPECT_EQ(rerun.recompute(), ChunkRecompute::kFullLayers);
  const ChunkCost c = rerun.cost(0, rerun.forward_ops());
  EXPECT_EQ(c.saved, 25u);
  EXPECT_EQ(c.forward_peak, 64u);
  EXPECT_EQ(c.backward_peak, 94u);
  EXPECT_EQ(c.forward, 5.5);
  EXPECT_EQ(c.backward, 16);
  EXPECT_EQ(c.states, kept.states);
  EXPECT_EQ(c.optimizer, kept.optimizer);

  // Cut at the layer start 3, each chunk reruns its own layer: chunk 0
  // saves x and e and sends o0 (10); chunk 1 saves the received o0 and the
  // loss. A cut inside h0 (at 2) leaves it whole: u0 crosses and is kept.
  const std::vector<ChunkCost> layered = chunk_costs(rerun, {0, 3});
  EXPECT_EQ(layered[0].saved, 14u);
  EXPECT_EQ(layered[0].backward, 2 * 2 + 2 + 2);  // emb.bwd, h0's backward and its rerun
  EXPECT_EQ(layered[1].saved, 11u);
  EXPECT_EQ(layered[1].send_backward, 10u);  // do0
  const std::vector<ChunkCost> split = chunk_costs(rerun, {0, 2});
  const std::vector<ChunkCost> split_kept = chunk_costs(keep, {0, 2});
  EXPECT_EQ(split[0].saved, split_kept[0].saved);
  EXPECT_EQ(split[0].backward, split_kept[0].backward);
  EXPECT_EQ(split[1].saved, 11u);  // h1 is whole in chunk 1 and reruns
}

PipelineShape two_pipeline_devices(PipelineSchedule schedule, int micro_batches) {
  return {.devices = 2,
          .chunks_per_device = 1,
          .micro_batches = micro_batches,
          .schedule = schedule,
          .devices_per_node = 2,
          .in_node = {.bandwidth = 1000, .latency = 0},
          .across_nodes = {.bandwidth = 1000, .latency = 0}};
}

TEST(PipelinePartition, SlowestChunkIsAsFastAsAnyCut) {
  const Graph graph = three_layer_pipeline_graph();
  const Hardware hw = pipeline_gpu();
  const ChunkedGraph chunked(graph, hw);
  // After h0: loads 3 + 0.02 (a0 out) and 7 + 0.02 (da0 back); after h1:
  // 6 + 0.04 (a1) and 4 + 0.04 (da1).
  const PartitionResult r = partition_pipeline(
      chunked, two_pipeline_devices(PipelineSchedule::kOneFOneB, 2), chunked.cut_points(false), 1 << 20);
  EXPECT_EQ(r.cut, (PipelineCut{0, 2}));
  EXPECT_DOUBLE_EQ(r.slowest, 6.04);
}

TEST(PipelinePartition, MemoryOfTheMicroBatchesInFlightBoundsTheCut) {
  const Graph graph = three_layer_pipeline_graph();
  const Hardware hw = pipeline_gpu();
  const ChunkedGraph chunked(graph, hw);
  const PipelineShape shape = two_pipeline_devices(PipelineSchedule::kOneFOneB, 2);
  // 1F1B holds 2 micro-batches on device 0: 800 + 30 + 90 = 920 bytes
  // after h1, where the cut after h0 puts 800 + 221 = 1,021 on device 1.
  const PartitionResult exact = partition_pipeline(chunked, shape, chunked.cut_points(false), 920);
  EXPECT_TRUE(exact.fits);
  EXPECT_EQ(exact.cut, (PipelineCut{0, 2}));
  // At 919 none fits; the cut needing least memory is the same one, at 920.
  const PartitionResult tight = partition_pipeline(chunked, shape, chunked.cut_points(false), 919);
  EXPECT_FALSE(tight.fits);
  EXPECT_EQ(tight.cut, (PipelineCut{0, 2}));
  EXPECT_EQ(tight.least_bytes, 920u);
  EXPECT_NE(partition_error(chunked, shape, 919, tight).find("needs 920 bytes"), std::string::npos);
  // Optimizer states sharded 2 ways (ZeRO-1): chunk 0 holds 800 - 400 + 200.
  PipelineShape sharded = shape;
  sharded.optimizer_shards = 2;
  const PartitionResult zero1 = partition_pipeline(chunked, sharded, chunked.cut_points(false), 720);
  EXPECT_TRUE(zero1.fits);
  EXPECT_FALSE(partition_pipeline(chunked, sharded, chunked.cut_points(false), 719).fits);
  // The simulation agrees: device 0 peaks at 920.
  const PipelineResult sim =
      simulate_pipeline(pipeline_setup(shape, chunk_costs(chunked, {0, 2})));
  EXPECT_EQ(sim.devices[0].peak_bytes, 920u);
  EXPECT_EQ(sim.devices[1].peak_bytes, 400u + 201u);
}

TEST(PipelinePartition, EvenLayerSplitNeedsAMultiple) {
  const Graph graph = three_layer_pipeline_graph();
  const Hardware hw = pipeline_gpu();
  const ChunkedGraph chunked(graph, hw);
  EXPECT_EQ(even_layer_cut(chunked, 3), (PipelineCut{0, 1, 2}));
  EXPECT_THROW(even_layer_cut(chunked, 2), Error);
  EXPECT_THROW(chunk_costs(chunked, {1, 2}), Error);
  EXPECT_THROW(chunk_costs(chunked, {0, 0}), Error);
}

// GPT-2 small in 4 stages of 3 blocks: every op in one chunk; every
// block's backward ops with its forward; the states add up to the
// model's, plus the tied word embedding the last stage holds again.
TEST(PipelineChunks, Gpt2SmallInFourStages) {
  const Graph graph = build_model("gpt2-small", {.batch = 1, .seq = 128});
  const Hardware hw = pipeline_gpu();
  const ChunkedGraph chunked(graph, hw);
  const PipelineCut cut = even_layer_cut(chunked, 4);
  EXPECT_EQ(chunk_first_op(chunked, cut, 0), "wte");
  EXPECT_EQ(chunk_first_op(chunked, cut, 1), "h3.ln_1");
  EXPECT_EQ(chunk_first_op(chunked, cut, 3), "h9.ln_1");
  const auto chunk_of = [&](OpId op) {
    return static_cast<int>(std::upper_bound(cut.begin(), cut.end(), chunked.anchor(op)) -
                            cut.begin()) - 1;
  };
  std::map<std::string, int> block_chunk;
  for (int pos = 0; pos < chunked.forward_ops(); ++pos) {
    const std::string& name = graph.ops[chunked.forward_op(pos)].name;
    const std::string block = name.substr(0, name.find('.'));
    if (block.size() > 1 && block[0] == 'h') block_chunk.emplace(block, chunk_of(chunked.forward_op(pos)));
  }
  ASSERT_EQ(block_chunk.size(), 12u);
  for (const Op& op : graph.ops) {
    const std::string block = op.name.substr(0, op.name.find('.'));
    const auto it = block_chunk.find(block);
    if (it != block_chunk.end()) {
      EXPECT_EQ(chunk_of(op.id), it->second) << op.name;
    }
  }
  EXPECT_EQ(chunk_of(static_cast<OpId>(graph.ops.size()) - 1), 3);  // ln_f's step
  const std::vector<ChunkCost> costs = chunk_costs(chunked, cut);
  uint64_t states = 0;
  double seconds = 0;
  for (const ChunkCost& c : costs) {
    states += c.states;
    seconds += c.forward + c.backward + c.optimizer;
  }
  uint64_t model_states = 0;
  uint64_t wte = 0;
  for (const Buffer& b : graph.buffers) {
    const bool state = b.kind == BufferKind::kParam || b.kind == BufferKind::kOptimState ||
                       (b.kind == BufferKind::kGrad && b.name.ends_with(".grad"));
    if (state) model_states += b.bytes;
    if (state && b.name.starts_with("wte.weight")) wte += b.bytes;
  }
  EXPECT_EQ(states, model_states + wte);
  double graph_seconds = 0;
  for (const Op& op : graph.ops) graph_seconds += op_time(hw, graph, op);
  EXPECT_NEAR(seconds, graph_seconds, 1e-12 * graph_seconds);
  // Between stages only the residual stream crosses: b x s x h bf16.
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(costs[k].send_forward, 1u * 128 * 768 * 2) << k;
    EXPECT_EQ(costs[k + 1].send_backward, 1u * 128 * 768 * 2) << k;
  }
}

}  // namespace
}  // namespace memwall

namespace memwall {
namespace {

// Data-parallel replicas of a pipeline all-reduce each device's gradients
// after its last backward (Note [Collective time]: 2(D-1)/D of the bytes a
// rank), within the node while a stage's replicas fit in it.
TEST(PipelinePlan, DataParallelReplicasAllReduceTheirGradients) {
  const Graph graph = build_model("gpt2-small", {.batch = 1, .seq = 128});
  const Hardware hw = find_gpu("a100-80g");
  const PipelineRequest one{.devices = 2, .micro_batches = 4,
                            .partition = PipelinePartition::kEvenLayers};
  PipelineRequest four = one;
  four.data_parallel = 4;
  const PipelinePlan alone = plan_pipeline(graph, hw, one);
  const PipelinePlan replicated = plan_pipeline(graph, hw, four);
  EXPECT_EQ(replicated.gpus, 8);
  ASSERT_EQ(replicated.costs.size(), 2u);
  // Beside it, GPT-2's tied embedding's gradient all-reduced between the
  // first and the last stage (tests/planner/pipeline_tied_test.cc).
  const auto tied = [&](const ChunkCost& c) {
    return c.shared_grads == 0 ? 0.0
                               : collective_time(hw, Collective::kAllReduce,
                                                 static_cast<double>(c.shared_grads),
                                                 CollectiveGroup{2, 2});
  };
  for (const ChunkCost& c : replicated.costs) {
    EXPECT_GT(c.grads, 0u);
    EXPECT_DOUBLE_EQ(c.grad_sync, collective_time(hw, Collective::kAllReduce,
                                                  1.5 * static_cast<double>(c.grads), 4) +
                                      tied(c));
  }
  for (const ChunkCost& c : alone.costs) EXPECT_DOUBLE_EQ(c.grad_sync, tied(c));
  // The passes are the same; each device's sync comes before its optimizer.
  EXPECT_EQ(replicated.sim.passes_end, alone.sim.passes_end);
  double last = 0;
  for (size_t d = 0; d < 2; ++d) {
    double end = 0;
    for (const PipelineTask& t : replicated.sim.tasks) {
      if (t.device == static_cast<int>(d)) end = std::max(end, t.end);
    }
    last = std::max(last, end + replicated.costs[d].grad_sync + replicated.costs[d].optimizer);
  }
  EXPECT_EQ(replicated.sim.step_time, last);
  EXPECT_DOUBLE_EQ(replicated.tokens_per_s * replicated.sim.step_time,
                   4 * alone.tokens_per_s * alone.sim.step_time);

  // Megatron-LM's distributed optimizer (ZeRO-1): a quarter of the
  // optimizer states a rank, its step a quarter as long; the gradients
  // reduce-scattered and the parameters all-gathered, 3/4 of each a rank.
  PipelineRequest sharded = four;
  sharded.distributed_optimizer = true;
  const PipelinePlan zero1 = plan_pipeline(graph, hw, sharded);
  EXPECT_TRUE(zero1.distributed_optimizer);
  for (size_t k = 0; k < 2; ++k) {
    const ChunkCost& whole = replicated.costs[k];
    const ChunkCost& c = zero1.costs[k];
    ASSERT_EQ(whole.optimizer_states % 4, 0u);
    EXPECT_EQ(c.optimizer_states, whole.optimizer_states / 4);
    EXPECT_EQ(c.states, whole.states - whole.optimizer_states * 3 / 4);
    EXPECT_EQ(c.optimizer, whole.optimizer / 4);
    const uint64_t params = whole.states - whole.grads - whole.optimizer_states;
    EXPECT_DOUBLE_EQ(
        c.grad_sync,
        collective_time(hw, Collective::kReduceScatter, 0.75 * static_cast<double>(c.grads), 4) +
            collective_time(hw, Collective::kAllGather, 0.75 * static_cast<double>(params), 4) +
            tied(c));
    EXPECT_EQ(zero1.sim.devices[k].states, c.states);
  }
}

}  // namespace
}  // namespace memwall

namespace memwall {
namespace {

// Note [Layout search]: every layout of 8 GPUs and a global batch of 8
// that the rules allow, each its own pipeline plan, the fastest that fits
// first; GPT-2 small's 12 heads do not split 8 ways.
TEST(LayoutSearch, EveryLayoutIsAPipelinePlanAndTheFastestFittingWins) {
  const Hardware hw = find_gpu("a100-80g");
  const ModelOptions options{.seq = 128};
  const LayoutSearch search = search_layouts("gpt2-small", options, hw, {.gpus = 8, .global_batch = 8});
  ASSERT_TRUE(search.best.has_value());
  ASSERT_FALSE(search.candidates.empty());
  bool saw_tp8 = false;
  bool saw_interleaved = false;
  for (const LayoutCandidate& c : search.candidates) {
    EXPECT_EQ(c.tensor_parallel * c.pipeline_parallel * c.data_parallel, 8);
    EXPECT_EQ(c.micro_batch * c.micro_batches * c.data_parallel, 8);
    EXPECT_EQ(c.micro_batch & (c.micro_batch - 1), 0) << c.micro_batch;
    if (c.schedule == PipelineSchedule::kInterleaved) {
      saw_interleaved = true;
      EXPECT_EQ(c.micro_batches % c.pipeline_parallel, 0);
      EXPECT_GT(c.pipeline_parallel, 1);
    }
    if (c.tensor_parallel == 8) {
      saw_tp8 = true;
      EXPECT_FALSE(c.fits);
      EXPECT_NE(c.why_not.find("heads"), std::string::npos) << c.why_not;
    }
  }
  EXPECT_TRUE(saw_tp8);
  EXPECT_TRUE(saw_interleaved);
  const LayoutCandidate& best = search.candidates.front();
  EXPECT_TRUE(best.fits);
  for (const LayoutCandidate& c : search.candidates) {
    if (c.fits) {
      EXPECT_LE(best.step_time, c.step_time) << layout_label(c);
    }
  }
  // The same layout planned directly (the search shards optimizer states
  // over the replicas) gives the same step.
  ModelOptions direct = options;
  direct.batch = best.micro_batch;
  direct.tensor_parallel = best.tensor_parallel;
  direct.sequence_parallel = best.tensor_parallel > 1;
  const PipelinePlan again = plan_pipeline(build_model("gpt2-small", direct), hw,
                                           {.devices = best.pipeline_parallel,
                                            .data_parallel = best.data_parallel,
                                            .distributed_optimizer = true,
                                            .chunks_per_device = best.chunks_per_device,
                                            .micro_batches = best.micro_batches,
                                            .schedule = best.schedule});
  EXPECT_EQ(again.sim.step_time, best.step_time);
  EXPECT_EQ(search.best->sim.step_time, best.step_time);
  EXPECT_THROW(search_layouts("gpt2-small", options, hw, {.gpus = 0, .global_batch = 16}), Error);
}

}  // namespace
}  // namespace memwall

namespace memwall {
namespace {

// Korthikanti et al. 2022 (sec. 4.2.2): with full recomputation a layer
// keeps only its input, 2 s b h / t bytes under sequence parallelism. GPT-2
// small's middle stages of 3 blocks at b 1, s 128, t 2 save 3 x 64 x 768 x 2
// = 294,912 B a micro-batch: the all-gathers and reduce-scatters between a
// block's ops rerun with it (Note [Pipeline recomputation]), so neither the
// gathered input nor the norm's output it gathers outlives the forward.
TEST(PipelineChunks, FullRecomputationUnderSequenceParallelismKeepsEachLayersShard) {
  const Graph graph = build_model(
      "gpt2-small", {.batch = 1, .seq = 128, .tensor_parallel = 2, .sequence_parallel = true});
  const ChunkedGraph rerun(graph, pipeline_gpu(), ChunkRecompute::kFullLayers);
  const std::vector<ChunkCost> costs = chunk_costs(rerun, even_layer_cut(rerun, 4));
  EXPECT_EQ(costs[1].saved, 294'912u);
  EXPECT_EQ(costs[2].saved, 294'912u);
  const ChunkedGraph keep(graph, pipeline_gpu());
  const std::vector<ChunkCost> kept = chunk_costs(keep, even_layer_cut(keep, 4));
  // The rerun's forward seconds, its collectives among them, join the backward.
  EXPECT_NEAR(costs[1].backward, kept[1].backward + kept[1].forward, 1e-12);
}

// Note [Layout search]: per-layer recomputation is tried only where keeping
// every activation does not fit. With Megatron's even split (one cut for
// every budget) and a budget one byte below the least any kept layout
// needs, none fits, each is followed by its recomputing twin, and the
// fastest recomputing one wins.
TEST(LayoutSearch, RecomputesOnlyWhereKeepingDoesNotFit) {
  const Hardware hw = pipeline_gpu();
  const ModelOptions options{.seq = 128};
  LayoutRequest request{.gpus = 2,
                        .global_batch = 8,
                        .pipeline_parallel = 2,
                        .partition = PipelinePartition::kEvenLayers};
  // Layouts planned (12 layers split evenly: 2 and 3 chunks a device, not 4).
  const auto planned = [](const LayoutSearch& s, ChunkRecompute recompute) {
    std::vector<const LayoutCandidate*> out;
    for (const LayoutCandidate& c : s.candidates) {
      if (c.step_time > 0 && c.recompute == recompute) out.push_back(&c);
    }
    return out;
  };
  const LayoutSearch kept = search_layouts("gpt2-small", options, hw, request);
  const auto kept_rows = planned(kept, ChunkRecompute::kNone);
  ASSERT_FALSE(kept_rows.empty());
  EXPECT_TRUE(planned(kept, ChunkRecompute::kFullLayers).empty());  // all fit the GPU
  uint64_t least = UINT64_MAX;
  for (const LayoutCandidate* c : kept_rows) {
    EXPECT_TRUE(c->fits) << layout_label(*c);
    EXPECT_EQ(c->pipeline_parallel, 2);
    least = std::min(least, c->peak_bytes);
  }
  // Just under keeping everything: selective recomputation, the least
  // rerun, fits every layout.
  request.budget = least - 1;
  const LayoutSearch tight = search_layouts("gpt2-small", options, hw, request);
  ASSERT_TRUE(tight.best.has_value());
  EXPECT_EQ(tight.best->recompute, ChunkRecompute::kSelective);
  EXPECT_EQ(tight.candidates.front().recompute, ChunkRecompute::kSelective);
  EXPECT_EQ(planned(tight, ChunkRecompute::kNone).size(), kept_rows.size());
  EXPECT_EQ(planned(tight, ChunkRecompute::kSelective).size(), kept_rows.size());
  // Per-layer only where selective does not fit the same layout.
  for (const LayoutCandidate* full : planned(tight, ChunkRecompute::kFullLayers)) {
    bool selective_over = false;
    for (const LayoutCandidate* c : planned(tight, ChunkRecompute::kSelective)) {
      selective_over = selective_over || (!c->fits && c->micro_batch == full->micro_batch &&
                                          c->schedule == full->schedule &&
                                          c->chunks_per_device == full->chunks_per_device);
    }
    EXPECT_TRUE(selective_over) << layout_label(*full);
  }
  uint64_t least_selective = UINT64_MAX;
  for (const LayoutCandidate* c : planned(tight, ChunkRecompute::kNone)) {
    EXPECT_FALSE(c->fits) << layout_label(*c);
  }
  for (const LayoutCandidate* c : planned(tight, ChunkRecompute::kSelective)) {
    least_selective = std::min(least_selective, c->peak_bytes);
  }
  EXPECT_NE(layout_label(tight.candidates.front()).find(", selective recompute"),
            std::string::npos);
  // Under that too: per-layer recomputation.
  request.budget = least_selective - 1;
  const LayoutSearch tighter = search_layouts("gpt2-small", options, hw, request);
  ASSERT_TRUE(tighter.best.has_value());
  EXPECT_EQ(tighter.best->recompute, ChunkRecompute::kFullLayers);
  EXPECT_EQ(planned(tighter, ChunkRecompute::kFullLayers).size(), kept_rows.size());
  EXPECT_NE(layout_label(tighter.candidates.front()).find(", per-layer recompute"),
            std::string::npos);
}

}  // namespace
}  // namespace memwall
