// Liveness and memory accounting on hand-built graphs with figures worked out
// by hand (see graph_builder.h for the two-layer step).
#include <gtest/gtest.h>

#include "graph_builder.h"

namespace memwall {
namespace {

using testing::GraphBuilder;

size_t k(BufferKind kind) { return static_cast<size_t>(kind); }

TEST(Liveness, TwoLayerStep) {
  const Graph graph = testing::two_layer_step();
  validate(graph);
  const std::vector<BufferLife> lives = liveness(graph);
  ASSERT_EQ(lives.size(), 7u);
  // param: exists from the start, persistent.
  EXPECT_EQ(lives[0].producer, kNoOp);
  EXPECT_EQ(lives[0].first_use, 0);
  EXPECT_EQ(lives[0].last_use, 4);
  EXPECT_EQ(lives[0].alloc_op, kNoOp);
  EXPECT_EQ(lives[0].free_op, kNoOp);
  // input: from the start until its last reader.
  EXPECT_EQ(lives[1].alloc_op, kNoOp);
  EXPECT_EQ(lives[1].free_op, 3);
  // activations: producer to last reader.
  EXPECT_EQ(lives[2].producer, 0);
  EXPECT_EQ(lives[2].first_use, 1);
  EXPECT_EQ(lives[2].last_use, 3);
  EXPECT_EQ(lives[2].alloc_op, 0);
  EXPECT_EQ(lives[2].free_op, 3);
  EXPECT_EQ(lives[3].alloc_op, 1);
  EXPECT_EQ(lives[3].free_op, 2);
  // grad read by the optimizer: kept to the end of the iteration.
  EXPECT_EQ(lives[4].alloc_op, 3);
  EXPECT_EQ(lives[4].last_use, 4);
  EXPECT_EQ(lives[4].free_op, kNoOp);
  // grad read only by backward: freed after its last reader.
  EXPECT_EQ(lives[5].alloc_op, 2);
  EXPECT_EQ(lives[5].free_op, 3);
  // optimizer state: persistent.
  EXPECT_EQ(lives[6].alloc_op, kNoOp);
  EXPECT_EQ(lives[6].free_op, kNoOp);
}

TEST(MemoryProfile, TwoLayerStep) {
  const Graph graph = testing::two_layer_step();
  const MemoryProfile profile = memory_profile(graph);
  EXPECT_EQ(profile.initial_bytes, 310u);  // w + x + w.m
  // op0 310+20+5; op1 330+40; op2 370+30; op3 (370-40)+100+7; op4 400
  EXPECT_EQ(profile.curve, (std::vector<uint64_t>{335, 370, 400, 467, 400}));
  EXPECT_EQ(profile.peak_bytes, 467u);
  EXPECT_EQ(profile.peak_op, 3);
  EXPECT_EQ(profile.peak_by_kind[k(BufferKind::kParam)], 100u);
  EXPECT_EQ(profile.peak_by_kind[k(BufferKind::kGrad)], 130u);
  EXPECT_EQ(profile.peak_by_kind[k(BufferKind::kOptimState)], 200u);
  EXPECT_EQ(profile.peak_by_kind[k(BufferKind::kActivation)], 20u);
  EXPECT_EQ(profile.peak_by_kind[k(BufferKind::kInput)], 10u);
  EXPECT_EQ(profile.peak_by_kind[k(BufferKind::kWorkspace)], 7u);
  EXPECT_EQ(profile.peak_by_kind[k(BufferKind::kTemp)], 0u);
}

TEST(MemorySummary, TwoLayerStep) {
  const Graph graph = testing::two_layer_step();
  const MemorySummary summary = memory_summary(graph);
  EXPECT_EQ(summary.bytes_by_kind[k(BufferKind::kParam)], 100u);
  EXPECT_EQ(summary.bytes_by_kind[k(BufferKind::kGrad)], 130u);
  EXPECT_EQ(summary.bytes_by_kind[k(BufferKind::kOptimState)], 200u);
  EXPECT_EQ(summary.bytes_by_kind[k(BufferKind::kActivation)], 60u);
  EXPECT_EQ(summary.bytes_by_kind[k(BufferKind::kInput)], 10u);
  EXPECT_EQ(summary.saved_activation_bytes, 60u);  // a1 and a2 are both read in backward
  EXPECT_EQ(summary.peak_workspace_bytes, 7u);
  EXPECT_EQ(saved_activation_bytes(graph, "a1"), 20u);
  EXPECT_EQ(saved_activation_bytes(graph, "a"), 60u);
  EXPECT_EQ(saved_activation_bytes(graph, "zzz"), 0u);
}

TEST(Liveness, UnusedBuffers) {
  GraphBuilder g;
  const BufferId in = g.buffer("unused_input", 8, BufferKind::kInput);
  const BufferId p = g.buffer("unused_param", 4, BufferKind::kParam);
  const BufferId a = g.buffer("dead", 16, BufferKind::kActivation);
  const BufferId t = g.buffer("t", 2, BufferKind::kTemp);
  g.op("make_t", Phase::kForward, {}, {t});
  g.op("make_dead", Phase::kForward, {t}, {a});
  g.op("idle", Phase::kForward, {}, {});
  validate(g.graph);
  const auto lives = liveness(g.graph);
  EXPECT_EQ(lives[in].alloc_op, kNoOp);
  EXPECT_EQ(lives[in].last_use, kNoOp);
  EXPECT_EQ(lives[in].free_op, 0);  // unused input: freed after op 0
  EXPECT_EQ(lives[p].free_op, kNoOp);
  EXPECT_EQ(lives[a].alloc_op, 1);
  EXPECT_EQ(lives[a].first_use, kNoOp);
  EXPECT_EQ(lives[a].free_op, 1);  // never read: freed right after its producer
  EXPECT_EQ(lives[t].free_op, 1);
  const MemoryProfile profile = memory_profile(g.graph, lives);
  // op0: 12 + t 2; op1: 4 + t 2 + dead 16; op2: 4
  EXPECT_EQ(profile.curve, (std::vector<uint64_t>{14, 22, 4}));
  EXPECT_EQ(profile.peak_op, 1);
  EXPECT_EQ(profile.peak_by_kind[k(BufferKind::kTemp)], 2u);
  EXPECT_EQ(profile.peak_by_kind[k(BufferKind::kInput)], 0u);
}

TEST(Liveness, GradUpdatedByOptimizerStaysToTheEnd) {
  GraphBuilder g;
  const BufferId w = g.buffer("w", 10, BufferKind::kParam);
  const BufferId gw = g.buffer("w.grad", 10, BufferKind::kGrad);
  const BufferId ga = g.buffer("a.grad", 3, BufferKind::kGrad);
  g.op("bwd1", Phase::kBackward, {w}, {gw});
  g.op("bwd2", Phase::kBackward, {w}, {ga});
  g.op("accumulate", Phase::kBackward, {ga}, {}, {gw});  // grad accumulation
  g.op("zero_grad", Phase::kOptimizer, {}, {}, {gw});    // only updates it
  g.op("tail", Phase::kComm, {}, {});
  validate(g.graph);
  const auto lives = liveness(g.graph);
  EXPECT_EQ(lives[gw].last_use, 3);
  EXPECT_EQ(lives[gw].free_op, kNoOp);
  EXPECT_EQ(lives[ga].free_op, 2);
  const MemoryProfile profile = memory_profile(g.graph, lives);
  EXPECT_EQ(profile.curve, (std::vector<uint64_t>{20, 23, 23, 20, 20}));
  EXPECT_EQ(profile.peak_op, 1);  // the first op reaching the peak
}

TEST(MemoryProfile, GraphWithoutOps) {
  GraphBuilder g;
  g.buffer("w", 10, BufferKind::kParam);
  g.buffer("x", 5, BufferKind::kInput);
  validate(g.graph);
  const auto lives = liveness(g.graph);
  EXPECT_EQ(lives[1].free_op, kNoOp);
  const MemoryProfile profile = memory_profile(g.graph);
  EXPECT_TRUE(profile.curve.empty());
  EXPECT_EQ(profile.peak_op, kNoOp);
  EXPECT_EQ(profile.peak_bytes, 15u);
  EXPECT_EQ(profile.initial_bytes, 15u);
  EXPECT_EQ(profile.peak_by_kind[k(BufferKind::kParam)], 10u);
  EXPECT_EQ(profile.peak_by_kind[k(BufferKind::kInput)], 5u);
}

TEST(MemoryProfile, EmptyGraph) {
  const MemoryProfile profile = memory_profile(Graph{});
  EXPECT_EQ(profile.peak_bytes, 0u);
  EXPECT_EQ(profile.peak_op, kNoOp);
}

TEST(MemoryProfile, RejectsInconsistentLifetimes) {
  const Graph graph = testing::two_layer_step();
  std::vector<BufferLife> lives = liveness(graph);
  lives[2].free_op = 99;
  EXPECT_THROW(memory_profile(graph, lives), Error);
  lives.pop_back();
  EXPECT_THROW(memory_profile(graph, lives), Error);
}

TEST(MemoryProfile, UnvalidatedGraphsFailCleanly) {
  Graph graph = testing::two_layer_step();
  graph.ops[2].in.push_back(1000);  // a backward op: every pass sees it
  EXPECT_THROW(liveness(graph), Error);
  EXPECT_THROW(memory_profile(graph), Error);
  EXPECT_THROW(memory_summary(graph), Error);
  // Sums beyond 2^62 are caught even without validate().
  Graph big = testing::two_layer_step();
  big.buffers[0].bytes = kMaxBytes;
  big.buffers[6].bytes = kMaxBytes;
  EXPECT_THROW(memory_profile(big), Error);
}

TEST(MemoryProfile, OverflowNamesTheOp) {
  // Buffers within validate's total can still overflow with a workspace.
  GraphBuilder g;
  const BufferId a = g.buffer("a", kMaxBytes / 2, BufferKind::kActivation);
  g.op("fill", Phase::kForward, {}, {a});
  g.op("big", Phase::kForward, {a}, {}, {}, kMaxBytes / 2 + 1);
  EXPECT_THROW(validate(g.graph), Error);  // which names the op too, from a file
  try {
    memory_profile(g.graph);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "graph: op 1 (\"big\"): 2305843009213693952 bytes of live buffers and "
                 "2305843009213693953 of workspace exceed the limit of 2^62 bytes in use");
  }
}

TEST(MemoryProfile, WorkspaceOnlyOp) {
  GraphBuilder g;
  g.op("scratch", Phase::kForward, {}, {}, {}, 1000);
  const MemoryProfile profile = memory_profile(g.graph);
  EXPECT_EQ(profile.peak_bytes, 1000u);
  EXPECT_EQ(profile.peak_by_kind[k(BufferKind::kWorkspace)], 1000u);
}

}  // namespace
}  // namespace memwall
