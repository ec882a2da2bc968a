// Rematerialization on ZeRO-3 rank graphs (Note [Gathers replay with the
// forward] in src/graph/versions.cc): the parameter all-gathers before each
// run of forward users are replayed with the activations they feed, so the
// checkpointing planners drop and recompute under stage 3 exactly what they
// do under stage 2 (issue 45: a traced 10B GPT-2 on 8 V100s planned at
// 30.68 GiB under stage 2 and only at 55.61 GiB under stage 3).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "memwall/graph/versions.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/remat/checkpoints.h"
#include "memwall/remat/remat.h"
#include "memwall/sim/simulator.h"
#include "memwall/swap/zero.h"

namespace memwall {
namespace {

const Graph& gpt2() {
  static const Graph g = build_model("gpt2-small", {.batch = 2, .seq = 128});
  return g;
}

Graph rank_graph(int stage, int prefetch_ops = 2) {
  return zero_rank_graph(gpt2(), {.ranks = 4, .stage = stage, .prefetch_ops = prefetch_ops});
}

// Names of the ops a plan recomputes, in step order.
std::vector<std::string> recomputed(const Graph& g, const Plan& plan, bool comm) {
  std::vector<std::string> names;
  for (const Step& s : plan.steps) {
    if (s.kind == StepKind::kRecompute && (g.ops[s.op].phase == Phase::kComm) == comm) {
      names.push_back(g.ops[s.op].name);
    }
  }
  return names;
}

TEST(Zero3Remat, ForwardGathersAreForwardOps) {
  const Graph r = rank_graph(3);
  const std::vector<uint8_t> forward = forward_side_ops(r);
  size_t gathers = 0;
  for (const Op& op : r.ops) {
    SCOPED_TRACE(op.name);
    if (op.phase != Phase::kComm) {
      EXPECT_EQ(forward[op.id], op.phase == Phase::kForward);
      continue;
    }
    // The forward's gathers read a shard and feed forward ops; the
    // backward's gathers and the gradients' reduce-scatters do not count.
    const bool first_reader_forward = [&] {
      for (OpId i = op.id + 1; i < static_cast<OpId>(r.ops.size()); ++i) {
        const BufferIds& in = r.ops[i].in;
        if (std::find(in.begin(), in.end(), op.out.at(0)) != in.end()) {
          return r.ops[i].phase == Phase::kForward;
        }
      }
      return false;
    }();
    EXPECT_EQ(forward[op.id], op.type == "all_gather" && first_reader_forward);
    gathers += forward[op.id];
  }
  // GPT-2 small: 12 layers x 12 tensors, the two embeddings and the final
  // norm's two, each gathered once for the forward (the tied head's second
  // use of wte, over 32 ops after the first, gathers it again).
  EXPECT_EQ(gathers, 12u * 12 + 2 + 2 + 1);
}

TEST(Zero3Remat, Stage3DropsAndRecomputesWhatStage2Does) {
  const Hardware& hw = find_gpu("a100-40g");
  const Graph s2 = rank_graph(2);
  const Graph s3 = rank_graph(3);
  // The layer boundaries survive the gathers ZeRO-3 puts before each
  // layer, also where they sit right at a boundary (no prefetch).
  const std::vector<BufferId> boundaries = candidate_checkpoints(s2);
  EXPECT_EQ(boundaries.size(), 26u);
  EXPECT_EQ(candidate_checkpoints(s3), boundaries);
  EXPECT_EQ(candidate_checkpoints(rank_graph(3, 0)), boundaries);
  // Every saved activation dropped: the same forward ops come back (the
  // rewrite keeps the input's buffer and op names), and under stage 3 the
  // gathers their recomputation reads.
  const std::vector<uint8_t> none(s2.buffers.size(), 0);
  const Plan p2 = plan_with_checkpoints(s2, none, hw.name, hw.device_memory_bytes);
  const Plan p3 = plan_with_checkpoints(s3, std::vector<uint8_t>(s3.buffers.size(), 0), hw.name,
                                        hw.device_memory_bytes);
  EXPECT_EQ(dropped_bytes(s3, std::vector<uint8_t>(s3.buffers.size(), 0)), dropped_bytes(s2, none));
  const std::vector<std::string> ops2 = recomputed(s2, p2, false);
  EXPECT_EQ(recomputed(s3, p3, false), ops2);
  EXPECT_FALSE(ops2.empty());
  EXPECT_TRUE(recomputed(s2, p2, true).empty());
  const std::vector<std::string> regathered = recomputed(s3, p3, true);
  EXPECT_FALSE(regathered.empty());
  for (const std::string& name : regathered) {
    EXPECT_NE(name.find(".gathered"), std::string::npos) << name;
  }
  // Both simulate; stage 3's shards and re-gathered copies peak lower.
  const SimResult sim2 = simulate(s2, p2, hw);
  const SimResult sim3 = simulate(s3, p3, hw);
  ASSERT_TRUE(sim2.valid) << sim2.reason;
  ASSERT_TRUE(sim3.valid) << sim3.reason;
  EXPECT_LT(sim3.peak_bytes[0], sim2.peak_bytes[0]);
}

}  // namespace
}  // namespace memwall
