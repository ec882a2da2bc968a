// Golden checks of per-layer and selective recomputation on the zoo's
// transformers, against the layer structure and Korthikanti et al.'s
// per-layer activation formula (tests/models/transformer_test.cc).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/plan/builders.h"
#include "memwall/remat/remat.h"
#include "memwall/sim/simulator.h"
#include "remat_test_util.h"

namespace memwall {
namespace {

Graph transformer(std::string_view model, int64_t batch, int64_t seq, bool flash = false) {
  return build_model(model, {.batch = batch, .seq = seq, .flash = flash});
}

TEST(RematPerLayer, Gpt2KeepsExactlyEachLayersInput) {
  const Graph graph = transformer("gpt2-small", 1, 128);
  const RematResult result = plan_per_layer(graph, gpu(), kMaxBytes, {});
  const std::vector<uint8_t> dropped = dropped_saved(graph, result.plan);
  const std::vector<uint8_t> saved = saved_for_backward(graph);
  const BufferUses uses(graph);
  for (int layer = 0; layer < 12; ++layer) {
    SCOPED_TRACE(fmt::format("layer {}", layer));
    const std::string prefix = fmt::format("h{}.", layer);
    // The kept buffers a layer's ops read from outside: its input, alone.
    std::set<std::string> inputs;
    for (const Op& op : graph.ops) {
      if (op.phase != Phase::kForward || !op.name.starts_with(prefix)) continue;
      for (const BufferId b : op.in) {
        if (saved[b] && !dropped[b] && !graph.buffers[b].name.starts_with(prefix)) {
          inputs.insert(graph.buffers[b].name);
        }
      }
    }
    const std::string expected =
        layer == 0 ? "embed_dropout" : fmt::format("h{}.mlp_residual", layer - 1);
    EXPECT_EQ(inputs, std::set<std::string>{expected});
    // Of what the layer itself saves, only its output (the next input) stays.
    for (const Buffer& b : graph.buffers) {
      if (!saved[b.id] || !b.name.starts_with(prefix)) continue;
      EXPECT_EQ(!dropped[b.id], b.name == prefix + "mlp_residual") << b.name;
    }
  }
  // Each layer's forward is recomputed once: the 15 ops of a GPT-2 block
  // but the last residual add, whose output is the kept next input.
  size_t recomputes = 0;
  for (const Step& step : result.plan.steps) recomputes += step.kind == StepKind::kRecompute;
  EXPECT_EQ(recomputes, 12u * 14u);
}

// Korthikanti et al. 2022, sec. 4.1 / 5: the attention core's s x s tensors
// take 5as^2b bytes per layer (softmax output 2as^2b, dropout mask as^2b,
// dropout output 2as^2b in 16-bit); selective recomputation drops exactly
// those and recomputes QK^T, softmax and dropout once per layer.
TEST(RematSelective, DropsExactlyTheQuadraticTerm) {
  struct Case {
    const char* model;
    int64_t s, b, a, layers;
    uint64_t bytes_per_as2b;  // 5 with attention dropout, 2 without (Llama)
    size_t ops_per_layer;
  };
  for (const Case& c :
       {Case{"gpt2-small", 128, 1, 12, 12, 5, 3}, Case{"gpt2-small", 256, 2, 12, 12, 5, 3},
        Case{"bert-base", 128, 2, 12, 12, 5, 3}, Case{"llama2-7b", 64, 1, 32, 32, 2, 2}}) {
    SCOPED_TRACE(fmt::format("{} s={} b={}", c.model, c.s, c.b));
    const Graph graph = transformer(c.model, c.b, c.s);
    const RematResult result = plan_selective(graph, gpu(), kMaxBytes, {});
    const std::vector<uint8_t> dropped = dropped_saved(graph, result.plan);
    uint64_t dropped_bytes = 0;
    for (const Buffer& b : graph.buffers) dropped_bytes += dropped[b.id] ? b.bytes : 0;
    const auto as2b = static_cast<uint64_t>(c.a * c.s * c.s * c.b);
    EXPECT_EQ(dropped_bytes, static_cast<uint64_t>(c.layers) * c.bytes_per_as2b * as2b);
    size_t recomputes = 0;
    for (const Step& step : result.plan.steps) recomputes += step.kind == StepKind::kRecompute;
    EXPECT_EQ(recomputes, static_cast<size_t>(c.layers) * c.ops_per_layer);
    // The peak drops by at most the s x s bytes of all layers (at these
    // small shapes the optimizer step may hold the peak: then not at all),
    // and rises by at most the recomputed scores, the one transient s x s
    // tensor the default plan never holds alongside the backward's.
    const SimResult keep_all = simulate(graph, default_plan(graph, "a100-80g", kMaxBytes), gpu());
    const SimResult selective = simulate(graph, result.plan, gpu());
    ASSERT_TRUE(selective.valid) << selective.reason;
    EXPECT_LE(selective.peak_bytes[0], keep_all.peak_bytes[0] + 2 * as2b);
    EXPECT_GE(selective.peak_bytes[0] + dropped_bytes, keep_all.peak_bytes[0]);
  }
}

TEST(RematSelective, FlashAttentionAndCnnsKeepEverything) {
  for (const Graph& graph : {transformer("gpt2-small", 1, 128, /*flash=*/true),
                             build_model("resnet50", {.batch = 1, .image = 64})}) {
    const RematResult result = plan_selective(graph, gpu(), kMaxBytes, {});
    EXPECT_EQ(result.plan, default_plan(graph, "a100-80g", kMaxBytes)) << graph.name;
    EXPECT_NE(result.note.find("keeps everything"), std::string::npos) << result.note;
  }
}

}  // namespace
}  // namespace memwall

namespace memwall {
namespace {

// torchtitan's op-level policy (docs/remat-selective-op.md) on the zoo's
// Llama with flash attention: of each layer's seven projections in forward
// order (wq, wk, wv, wo, w1, w3, w2) the 2nd, 4th and 6th are not saved,
// and the layer's recompute runs them again: wk for the rotary embedding of
// k, wo for the residual stream the second norm reads, w3 for the SwiGLU
// product. Each comes back once per layer; the saved ones (held for the
// recompute) and the attention kernel never do.
TEST(RematSelectiveOp, LlamaRecomputesEverySecondProjectionBackwardNeeds) {
  const Graph graph = transformer("llama2-7b", 1, 64, /*flash=*/true);
  const RematResult result = plan_selective_op(graph, gpu(), kMaxBytes, {});
  const SimResult sim = simulate(graph, result.plan, gpu());
  ASSERT_TRUE(sim.valid) << sim.reason;
  std::vector<std::set<std::string>> recomputed(32);
  for (const Step& step : result.plan.steps) {
    if (step.kind != StepKind::kRecompute) continue;
    const Op& op = graph.ops[step.op];
    EXPECT_NE(op.type, "flash_attention") << op.name;
    for (int layer = 0; layer < 32; ++layer) {
      const std::string prefix = fmt::format("layers.{}.", layer);
      if (!op.name.starts_with(prefix) || op.type != "matmul") continue;
      EXPECT_TRUE(recomputed[layer].insert(op.name.substr(prefix.size())).second)
          << op.name << " recomputed twice";
    }
  }
  for (int layer = 0; layer < 32; ++layer) {
    SCOPED_TRACE(fmt::format("layer {}", layer));
    EXPECT_EQ(recomputed[layer], (std::set<std::string>{"attn.wk", "attn.wo", "mlp.w3"}));
  }
  // Less recomputed than full checkpointing, more kept.
  const RematResult full = plan_per_layer(graph, gpu(), kMaxBytes, {});
  EXPECT_LT(recomputed_flops(graph, result.plan), recomputed_flops(graph, full.plan));
}

}  // namespace
}  // namespace memwall
