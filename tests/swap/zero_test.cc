// ZeRO as a graph transform (Note [ZeRO as a graph] in src/swap/zero.cc):
// per-rank model-state bytes, the communication volume of each stage as the
// ZeRO paper states it (Rajbhandari et al. 2020, sec. 7: stages 0-2 send
// 2(N-1)/N of the parameter bytes per rank and iteration, stage 3 1.5x
// that), and plans of the rank graph accepted by the simulator.
#include "memwall/swap/zero.h"

#include <gtest/gtest.h>

#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/plan/builders.h"
#include "memwall/sim/simulator.h"

namespace memwall {
namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

uint64_t bytes_of_kind(const Graph& g, BufferKind kind) {
  uint64_t total = 0;
  for (const Buffer& b : g.buffers) total += b.kind == kind ? b.bytes : 0;
  return total;
}

double comm_bytes(const Graph& g, std::string_view type = "") {
  double total = 0;
  for (const Op& op : g.ops) {
    if (op.phase == Phase::kComm && (type.empty() || op.type == type)) total += op.bytes;
  }
  return total;
}

const Graph& llama() {
  static const Graph g = build_model("llama2-7b", {.batch = 1, .seq = 16});
  return g;
}

TEST(Zero, ShardsExactlyWhatEachStagePartitions) {
  const Graph& g = llama();
  const auto states = model_states(g);
  ASSERT_EQ(states.size(), 291u);  // 32 layers x 9 tensors + embedding, final norm, head
  constexpr uint64_t kRanks = 8;
  uint64_t params = 0, state_shards = 0, param_shards = 0;
  for (const ModelState& s : states) {
    params += g.buffers[s.param].bytes;
    param_shards += ceil_div(g.buffers[s.param].bytes, kRanks);
    for (const BufferId st : s.states) state_shards += ceil_div(g.buffers[st].bytes, kRanks);
  }
  EXPECT_EQ(params, 2u * 6738415616);  // Llama-2-7B, bf16
  for (int stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE(stage);
    const Graph r = zero_rank_graph(g, {.ranks = kRanks, .stage = stage});
    validate(r);
    EXPECT_EQ(bytes_of_kind(r, BufferKind::kParam), stage == 3 ? param_shards : params);
    EXPECT_EQ(bytes_of_kind(r, BufferKind::kOptimState),
              stage == 0 ? bytes_of_kind(g, BufferKind::kOptimState) : state_shards);
    // bf16 gradients are the size of the parameters; from stage 2 the step
    // reads a 1/N shard.
    EXPECT_EQ(bytes_of_kind(r, BufferKind::kGrad), stage >= 2 ? param_shards : params);
  }
}

TEST(Zero, CommunicationVolumeIsThePapers) {
  const Graph& g = llama();
  const double psi = 2.0 * 6738415616;  // parameter bytes
  const double n = 8, share = (n - 1) / n;
  const Graph s0 = zero_rank_graph(g, {.ranks = 8, .stage = 0});
  EXPECT_DOUBLE_EQ(comm_bytes(s0), 2 * share * psi);
  EXPECT_DOUBLE_EQ(comm_bytes(s0, "all_reduce"), 2 * share * psi);
  for (int stage : {1, 2}) {
    const Graph r = zero_rank_graph(g, {.ranks = 8, .stage = stage});
    EXPECT_DOUBLE_EQ(comm_bytes(r, "reduce_scatter"), share * psi);
    EXPECT_DOUBLE_EQ(comm_bytes(r, "all_gather"), share * psi);
  }
  // Stage 3: every parameter gathered once in forward and once in backward,
  // but the token embedding (32000 x 4096), whose backward is a scatter-add
  // into its gradient that does not read the weight.
  const Graph s3 = zero_rank_graph(g, {.ranks = 8, .stage = 3});
  const double embedding = 2.0 * 32000 * 4096;
  EXPECT_DOUBLE_EQ(comm_bytes(s3), 3 * share * psi - share * embedding);
}

TEST(Zero, RankPlansSimulateAndStagesSaveMemory) {
  const Graph g = build_model("gpt2-small", {.batch = 2, .seq = 128});
  const Hardware& hw = find_gpu("a100-40g");
  uint64_t previous = UINT64_MAX;
  uint64_t previous_grads = UINT64_MAX;
  for (int stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE(stage);
    const Graph r = zero_rank_graph(g, {.ranks = 4, .stage = stage});
    const SimResult sim = simulate(r, default_plan(r, hw.name, hw.device_memory_bytes), hw);
    ASSERT_TRUE(sim.valid) << sim.reason;
    EXPECT_GT(sim.comm_time, 0);
    // Stage 1 shards optimizer states and stage 3 parameters, which are
    // alive at the peak. The peak is in cross-entropy's backward, before
    // most gradients exist, so stage 2's gradient shards lower it little or
    // not at all: they show in the gradient bytes instead.
    uint64_t grads = 0;
    for (const Buffer& b : r.buffers) grads += b.kind == BufferKind::kGrad ? b.bytes : 0;
    if (stage == 2) {
      EXPECT_LE(sim.peak_bytes[0], previous);
      EXPECT_LT(grads, previous_grads / 2);
    } else {
      EXPECT_LT(sim.peak_bytes[0], previous);
    }
    previous = sim.peak_bytes[0];
    previous_grads = grads;
    // Collectives overlap compute: the iteration is shorter than their sum.
    EXPECT_LT(sim.iteration_time, sim.compute_time + sim.comm_time);
  }
}

TEST(Zero, OneRankChangesNothingAndBadSetupsAreRefused) {
  const Graph g = build_model("gpt2-small", {.batch = 1, .seq = 64});
  EXPECT_EQ(zero_rank_graph(g, {.ranks = 1, .stage = 3}).ops.size(), g.ops.size());
  EXPECT_THROW(zero_rank_graph(g, {.ranks = 0}), Error);
  EXPECT_THROW(zero_rank_graph(g, {.ranks = 2, .stage = 4}), Error);
}

}  // namespace
}  // namespace memwall
