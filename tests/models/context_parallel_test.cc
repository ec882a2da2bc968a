// Note [Context parallelism in the zoo] (src/models/context_parallel.cc):
// one context-parallel rank's graph, its ring exchanges, its attention's
// FLOPs and what it saves, exactly.
//
// The model: Llama at a small shape (4 layers, h 256, 8 query heads of 32
// with 2 key-value heads, SwiGLU width 512, vocabulary 1,000), bf16,
// batch 2, with --flash.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "zoo_models.h"

namespace memwall {
namespace {

constexpr double kBatch = 2, kHeads = 8, kKvHeads = 2, kHeadDim = 32, kCpLayers = 4;

Graph cp_llama(int64_t seq, int64_t c, int64_t t = 1) {
  ModelOptions o = small_llama_options(2, seq);
  o.context_parallel = c;
  o.tensor_parallel = t;
  o.sequence_parallel = t > 1;
  return build_model("llama2-7b", o);
}

// Per layer, c - 1 exchanges of the packed key-value block forward, and c -
// 1 of it and c - 1 of its gradient backward, each block 2 (k and v) x b x
// kv_heads x s/c x d bf16 values.
TEST(ContextParallel, RingExchangesPerLayer) {
  for (const int64_t c : {2, 4, 8}) {
    SCOPED_TRACE(testing::Message() << "c " << c);
    const int64_t s = 1024;
    const Graph g = cp_llama(s, c);
    EXPECT_NO_THROW(validate(g));
    EXPECT_EQ(graph_context_parallel(g), c);
    const double block = 2.0 * kBatch * kKvHeads * static_cast<double>(s / c) * kHeadDim * 2;
    int forward = 0, backward = 0;
    for (const Op& op : g.ops) {
      if (op.type != "cp_send_recv") continue;
      EXPECT_EQ(op.phase, Phase::kComm);
      EXPECT_DOUBLE_EQ(op.bytes, block) << op.name;
      (op.name.find(".bwd_send_recv") != std::string::npos ? backward : forward) += 1;
    }
    EXPECT_EQ(forward, 4 * (c - 1));
    EXPECT_EQ(backward, 4 * 2 * (c - 1));
  }
  EXPECT_EQ(cp_llama(1024, 4).name.ends_with(" flash cp4"), true) << cp_llama(1024, 4).name;
}

// The c ranks' attention FLOPs together are the whole sequence's causal
// attention: c ranks x c steps x 2 b a (s/c)^2 d = 2 b a s^2 d forward
// (FlashAttention-2's 4 b a s^2 d halved by the mask), 2.5x that backward.
TEST(ContextParallel, AttentionFlopsSumToTheWholeSequence) {
  const int64_t s = 2048;
  const Graph whole = cp_llama(s, 1);
  double whole_forward = 0, whole_backward = 0;
  for (const Op& op : whole.ops) {
    if (op.type == "flash_attention") whole_forward += op.flops;
    if (op.type == "flash_attention_backward") whole_backward += op.flops;
  }
  EXPECT_DOUBLE_EQ(whole_forward,
                   kCpLayers * 2.0 * kBatch * kHeads * static_cast<double>(s * s) * kHeadDim);
  for (const int64_t c : {2, 8}) {
    const Graph rank = cp_llama(s, c);
    double forward = 0, backward = 0;
    for (const Op& op : rank.ops) {
      if (op.type == "flash_attention_ring_step") forward += op.flops;
      if (op.type == "flash_attention_ring_step_backward") backward += op.flops;
    }
    EXPECT_DOUBLE_EQ(static_cast<double>(c) * forward, whole_forward) << "c " << c;
    EXPECT_DOUBLE_EQ(static_cast<double>(c) * backward, whole_backward) << "c " << c;
  }
}

// One hop of the ring over NVLink (in a node) and over the network (across
// nodes), Note [Collective time]: launch + one step + bytes / bandwidth.
TEST(ContextParallel, RingHopTime) {
  const Hardware& node = find_gpu("h100-80g");
  const double bytes = 64.0 * (1 << 20);
  EXPECT_DOUBLE_EQ(collective_time(node, Collective::kSendRecv, bytes, 8),
                   node.launch_latency + node.collective_step_latency +
                       bytes / (node.interconnect_bandwidth / 2));
  EXPECT_DOUBLE_EQ(
      collective_time(node, Collective::kSendRecv, bytes, 16),
      node.launch_latency + node.network_step_latency + bytes / node.network_bandwidth);
  // Under tensor parallelism t, a node holds gpus_per_node / t of the ring.
  const Graph g = cp_llama(1024, 4, 2);
  for (const Op& op : g.ops) {
    if (op.type != "cp_send_recv") continue;
    const CollectiveGroup group = collective_group(node, g, op);
    EXPECT_EQ(group.ranks, 4);
    EXPECT_EQ(group.gpus_per_node, 4);
    break;
  }
  EXPECT_EQ(graph_gpus(g), 8);
}

TEST(ContextParallel, RefusesWhatIsNotBuilt) {
  const auto message = [](auto build) {
    try {
      build();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] { cp_llama(1004, 4); }).find("2 x 4 equal chunks"), std::string::npos)
      << message([] { cp_llama(1004, 4); });
  EXPECT_NE(message([] {
              ModelOptions o;
              o.context_parallel = 2;
              build_model("llama2-7b", o);
            }).find("give --flash"),
            std::string::npos);
  EXPECT_NE(message([] {
              ModelOptions o;
              o.context_parallel = 2;
              o.flash = true;
              build_model("mixtral-8x7b", o);
            }).find("GPT-2 and Llama"),
            std::string::npos);
}

}  // namespace
}  // namespace memwall
