// Note [Expert parallelism in the zoo] (src/models/expert_parallel.cc) and
// Mixtral under tensor parallelism: one rank's graph of Mixtral 8x7B, its
// parameters, its all-to-alls and its collectives, exactly.
//
// Mixtral 8x7B (Hugging Face config.json of mistralai/Mixtral-8x7B-v0.1):
// 32 layers, h 4096, 32 heads with 8 key-value heads of 128, 8 experts of
// SwiGLU width 14,336, top-2, vocabulary 32,000, untied head. A layer's
// attention has 4096 (4096 + 1024 + 1024 + 4096) = 41,943,040 parameters,
// its router 8 x 4096 = 32,768, its two RMSNorms 8,192, each expert
// 3 x 4096 x 14,336 = 176,160,768; the embedding and the head 32,000 x 4096
// = 131,072,000 each, the final norm 4,096. In all 46,702,792,704 (the
// model card's "46.7B total parameters").
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "memwall/base/error.h"
#include "memwall/graph/counts.h"
#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"

namespace memwall {
namespace {

constexpr int64_t kLayers = 32, kAttention = 41943040, kRouter = 32768, kNorms = 8192;
constexpr int64_t kExpert = 176160768, kTable = 131072000, kFinalNorm = 4096;

Graph mixtral(int64_t seq, int64_t t, bool sequence, int64_t e) {
  ModelOptions o;
  o.batch = 1;
  o.seq = seq;
  o.tensor_parallel = t;
  o.sequence_parallel = sequence;
  o.expert_parallel = e;
  return build_model("mixtral-8x7b", o);
}

// A rank holds 8 / e experts a layer, each 1/t of its width; the attention
// and the vocabulary split t ways; the router and the norms whole. Megatron
// pads the vocabulary to a multiple of 128 t: 32,000 stays for t = 2 and
// becomes 32,256 for t = 4.
TEST(ExpertParallel, ParametersOfOneRank) {
  const auto expected = [](int64_t t, int64_t e) {
    const int64_t table = t == 4 ? 32256 * 4096 : kTable;
    return kLayers * (kAttention / t + kRouter + kNorms + 8 / e * kExpert / t) + 2 * table / t +
           kFinalNorm;
  };
  EXPECT_EQ(expected(1, 1), 46702792704);
  for (const auto& [t, e] : {std::pair{1, 1}, {2, 1}, {1, 8}, {2, 4}, {4, 2}}) {
    SCOPED_TRACE(testing::Message() << "t " << t << " e " << e);
    const Graph g = mixtral(256, t, t > 1, e);
    EXPECT_NO_THROW(validate(g));
    EXPECT_EQ(param_count(g), static_cast<uint64_t>(expected(t, e)));
    EXPECT_EQ(graph_expert_parallel(g), e);
  }
  EXPECT_EQ(mixtral(256, 2, true, 4).name, "mixtral-8x7b b1 s256 bf16 tp2 sp ep4");
}

// Per layer and micro-batch: dispatch and combine forward, their gradients
// backward, each sending (e-1)/e of the n k routed copies of h bf16 values;
// each local expert receives n e k / 8 tokens.
TEST(ExpertParallel, AllToAllVolumePerLayer) {
  const int64_t n = 4096, k = 2, h = 4096, e = 8;
  const Graph g = mixtral(n, 1, false, e);
  const double whole = 2.0 * n * k * h;
  int ops = 0;
  for (const Op& op : g.ops) {
    if (op.phase != Phase::kComm || !op.name.starts_with("layers.3.")) continue;
    EXPECT_EQ(op.type, "ep_all_to_all") << op.name;
    EXPECT_DOUBLE_EQ(op.bytes, whole * (e - 1) / e) << op.name;
    ++ops;
  }
  EXPECT_EQ(ops, 4);
  int found = 0;
  for (const Buffer& buffer : g.buffers) {
    if (buffer.name != "layers.3.moe.dispatch.expert0") continue;
    EXPECT_EQ(buffer.shape, (Dims{n * e * k / 8, h}));
    ++found;
  }
  EXPECT_EQ(found, 1);
}

// Under tensor parallelism the mixture is one block: its input made whole
// (all-gathered with sequence parallelism; without, its gradient
// all-reduced) and its partial sums reduced once (all-reduced, or
// reduce-scattered): the same volumes as a Megatron MLP.
TEST(ExpertParallel, TensorParallelMixtureIsOneBlock) {
  const int64_t s = 1024, h = 4096, t = 4;
  const double whole = 2.0 * s * h, share = 3.0 / 4.0;
  for (const bool sequence : {false, true}) {
    SCOPED_TRACE(sequence ? "sequence parallel" : "tensor parallel");
    const Graph g = mixtral(s, t, sequence, 1);
    double sent = 0;
    int ops = 0;
    for (const Op& op : g.ops) {
      if (op.phase != Phase::kComm || !op.name.starts_with("layers.3.moe.")) continue;
      EXPECT_TRUE(is_tensor_parallel_collective(op)) << op.name;
      sent += op.bytes;
      ++ops;
    }
    // f and g: one forward and one backward collective each; an
    // all-reduce sends twice what a gather or a scatter does.
    EXPECT_EQ(ops, sequence ? 4 : 2);
    EXPECT_DOUBLE_EQ(sent, 4 * share * whole);
  }
}

// Note [Collective time], the all-to-all: one step's latency, and the
// bytes to the node's peers and to the other nodes' at once.
TEST(ExpertParallel, AllToAllTime) {
  const Hardware& hw = find_gpu("a100-80g");  // 8 GPUs a node
  const double bytes = 7.0e8, one_way = hw.interconnect_bandwidth / 2;
  EXPECT_DOUBLE_EQ(collective_time(hw, Collective::kAllToAll, bytes, 8),
                   hw.launch_latency + hw.collective_step_latency + bytes / one_way);
  // 16 ranks on 2 nodes: of M = 16/15 bytes, 7/16 stays in the node and
  // 8/16 leaves it over the rank's own adapter.
  const double whole = bytes * 16 / 15;
  const double expected = hw.launch_latency + hw.collective_step_latency +
                          hw.network_step_latency +
                          std::max(whole * 7 / 16 / one_way, whole * 8 / 16 / hw.network_bandwidth);
  EXPECT_DOUBLE_EQ(collective_time(hw, Collective::kAllToAll, bytes, 16), expected);
  // The graph's all-to-alls run over its expert-parallel ranks: 4 ranks of
  // a tensor-parallel pair each, 8 GPUs, one node.
  const Graph g = mixtral(256, 2, false, 4);
  for (const Op& op : g.ops) {
    if (op.type != "ep_all_to_all") continue;
    EXPECT_DOUBLE_EQ(op_time(hw, g, op), collective_time(hw, Collective::kAllToAll, op.bytes, 4));
  }
  EXPECT_EQ(graph_gpus(g), 8);  // e data-parallel ranks of t
}

TEST(ExpertParallel, BadLayoutsAreOneLine) {
  const auto error = [](const std::string& model, int64_t e) {
    ModelOptions o;
    o.expert_parallel = e;
    try {
      build_model(model, o);
    } catch (const Error& err) {
      return std::string(err.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error("mixtral-8x7b", 3),
            "model mixtral-8x7b: 8 experts do not split over 3 expert-parallel ranks");
  EXPECT_EQ(error("llama2-7b", 2),
            "model llama2-7b: expert parallelism is for mixture-of-experts models (mixtral-8x7b)");
}

}  // namespace
}  // namespace memwall
