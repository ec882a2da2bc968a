// Properties every zoo model must have, whatever its architecture.
#include <gtest/gtest.h>

#include "memwall/base/error.h"
#include "memwall/graph/counts.h"
#include "memwall/graph/graph.h"
#include "memwall/models/zoo.h"
#include "zoo_models.h"

namespace memwall {
namespace {

// Small shapes keep the suite fast; parameter counts do not depend on them.
ModelOptions small(const ModelInfo& m) {
  ModelOptions o;
  o.batch = 1;
  if (m.family == ModelFamily::kCnn) {
    o.image = 64;
  } else {
    o.seq = 64;
  }
  return o;
}

class ZooModel : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooModel, BuildsAValidGraphWithThePublishedParameterCount) {
  const ModelInfo& m = find_model(GetParam());
  Graph g = build_model(m.name, small(m));
  EXPECT_NO_THROW(validate(g));
  EXPECT_EQ(param_count(g), static_cast<uint64_t>(m.param_count));
  EXPECT_EQ(g.meta["param_count"], m.param_count);
  EXPECT_EQ(g.meta["model"], m.name);

  // A whole iteration: forward, backward and optimizer phases, in that order.
  int last_phase = 0;
  bool seen[3] = {false, false, false};
  for (const Op& op : g.ops) {
    int phase = static_cast<int>(op.phase);
    ASSERT_LE(phase, 2) << op.name;
    EXPECT_GE(phase, last_phase) << "phases out of order at " << op.name;
    last_phase = phase;
    seen[phase] = true;
  }
  EXPECT_TRUE(seen[0] && seen[1] && seen[2]);

  // Every parameter gets a gradient and exactly one optimizer step.
  const MemorySummary s = memory_summary(g);
  const uint64_t param_bytes = s.bytes_by_kind[static_cast<int>(BufferKind::kParam)];
  EXPECT_EQ(s.bytes_by_kind[static_cast<int>(BufferKind::kGrad)], param_bytes);
  // bf16 Adam: fp32 master, exp_avg, exp_avg_sq = 12 bytes per parameter (ZeRO sec. 3.1).
  EXPECT_EQ(s.bytes_by_kind[static_cast<int>(BufferKind::kOptimState)], 6 * param_bytes);
  EXPECT_GT(s.saved_activation_bytes, 0u);

  const MemoryProfile p = memory_profile(g);
  EXPECT_GT(p.peak_bytes, 16ull * param_count(g) - 1);
  EXPECT_EQ(p.initial_bytes, param_bytes +
                                 s.bytes_by_kind[static_cast<int>(BufferKind::kOptimState)] +
                                 s.bytes_by_kind[static_cast<int>(BufferKind::kInput)]);
}

TEST_P(ZooModel, Fp32SgdHasNoOptimizerState) {
  const ModelInfo& m = find_model(GetParam());
  ModelOptions o = small(m);
  o.precision = Precision::kFp32;
  o.optimizer = Optimizer::kSgd;
  Graph g = build_model(m.name, o);
  const MemorySummary s = memory_summary(g);
  EXPECT_EQ(s.bytes_by_kind[static_cast<int>(BufferKind::kParam)], 4 * param_count(g));
  EXPECT_EQ(s.bytes_by_kind[static_cast<int>(BufferKind::kOptimState)], 0u);
}

// The forward pass alone: the training iteration's forward ops, the same
// ones in the same order, and nothing else (no grads, no optimizer states).
TEST_P(ZooModel, ForwardOnlyIsTheIterationsForwardOps) {
  const ModelInfo& m = find_model(GetParam());
  ModelOptions o = small(m);
  const Graph train = build_model(m.name, o);
  o.forward_only = true;
  const Graph g = build_model(m.name, o);
  EXPECT_NO_THROW(validate(g));
  EXPECT_FALSE(has_backward(g));
  EXPECT_EQ(g.name, train.name + " forward-only");
  EXPECT_EQ(g.meta["forward_only"], true);
  EXPECT_FALSE(g.meta.contains("optimizer"));
  size_t forward = 0;
  for (const Op& op : train.ops) forward += op.phase == Phase::kForward;
  ASSERT_EQ(g.ops.size(), forward);
  for (const Op& op : g.ops) {
    EXPECT_EQ(op.phase, Phase::kForward) << op.name;
    EXPECT_EQ(op.name, train.ops[op.id].name);
  }
  const MemorySummary s = memory_summary(g);
  EXPECT_EQ(s.bytes_by_kind[static_cast<int>(BufferKind::kGrad)], 0u);
  EXPECT_EQ(s.bytes_by_kind[static_cast<int>(BufferKind::kOptimState)], 0u);
  EXPECT_EQ(param_count(g), static_cast<uint64_t>(m.param_count));
}

INSTANTIATE_TEST_SUITE_P(All, ZooModel, ::testing::ValuesIn(zoo_model_names()), zoo_test_name);

TEST(Zoo, RejectsBadOptions) {
  ModelOptions o;
  o.batch = -1;
  EXPECT_THROW(build_model("gpt2-small", o), Error);
  o.batch = 1;
  o.seq = 1025;  // GPT-2's learned positions stop at 1024
  EXPECT_THROW(build_model("gpt2-small", o), Error);
  o.seq = 0;
  o.image = 224;
  EXPECT_THROW(build_model("gpt2-small", o), Error);
  EXPECT_THROW(build_model("no-such-model", {}), Error);
  EXPECT_THROW(parse_precision("fp8"), Error);
  EXPECT_THROW(parse_optimizer("lion"), Error);
}

TEST(Zoo, HugeShapesOverflowCleanly) {
  // 2^24 images of 65536^2 pixels: single tensors reach 2^61 bytes and their
  // sum passes 2^62; the sizes are checked, never wrapped.
  ModelOptions o;
  o.batch = int64_t{1} << 24;
  o.image = 65536;
  EXPECT_THROW(
      {
        Graph g = build_model("unet", o);
        validate(g);
        memory_profile(g);
      },
      Error);
}

}  // namespace
}  // namespace memwall

namespace memwall {
namespace {

std::string shape_error(std::string_view model, const ModelShape& shape, int64_t seq = 64) {
  try {
    build_model(model, {.batch = 1, .seq = seq, .shape = shape});
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Narayanan et al. 2021 (SC21), Table 1's "1.7B" GPT: 24 layers, h 2304,
// 24 heads, vocabulary 51,200, sequence 2048. GPT-2's block has 12h^2 +
// 13h parameters; with the token and position embeddings and the final
// norm: 24 (12 h^2 + 13 h) + 51200 h + 2048 h + 2h = 1,652,230,656.
TEST(Zoo, GptAtAnotherShape) {
  const ModelShape shape{.layers = 24, .hidden = 2304, .heads = 24, .vocab = 51200,
                       .positions = 2048};
  const Graph g = build_model("gpt2-small", {.batch = 1, .seq = 2048, .shape = shape});
  EXPECT_EQ(param_count(g), 1'652'230'656u);
  EXPECT_EQ(g.name, "gpt2-small l24 h2304 a24 v51200 p2048 b1 s2048 bf16");
  EXPECT_EQ(g.meta["shape"]["hidden"], 2304);
  // A shape that sets some dimensions keeps the variant's others.
  const Graph deeper = build_model("gpt2-small", {.batch = 1, .seq = 64, .shape = {.layers = 13}});
  const Graph base = build_model("gpt2-small", {.batch = 1, .seq = 64});
  EXPECT_EQ(param_count(deeper) - param_count(base), 12u * 768 * 768 + 13 * 768);
  EXPECT_EQ(shape_error("bert-base", shape),
            "model bert-base: another shape (layers, hidden, heads, ...) is for the GPT-2 and "
            "Llama models");
  EXPECT_EQ(shape_error("gpt2-small", {.kv_heads = 4}),
            "model gpt2-small: GPT-2's blocks have no key-value heads or MLP width of their own "
            "to set");
  EXPECT_EQ(shape_error("llama3-8b", {.hidden = 4096, .heads = 32, .kv_heads = 5}),
            "model llama3-8b: 5 key-value heads do not divide the heads (32)");
  EXPECT_EQ(shape_error("gpt2-small", {.hidden = 1000, .heads = 3}),
            "model gpt2-small: hidden size 1000 does not split into 3 heads");
  EXPECT_EQ(shape_error("gpt2-small", {.hidden = 1024}),
            "model gpt2-small: another hidden size needs its heads, and the other way round");
  EXPECT_EQ(shape_error("gpt2-small", {.layers = 5000}),
            "model gpt2-small: layers 5000 out of range (1..4096)");
  EXPECT_EQ(shape_error("gpt2-small", {.positions = 512}, 1024),
            "model gpt2-small: sequence length 1024 out of range (1..512, the model's context)");
}


// Llama 3 405B (Llama Team 2024, "The Llama 3 Herd of Models", Table 3:
// 126 layers, model dimension 16,384, FFN 53,248, 128 heads, 8 key-value
// heads; vocabulary 128,256 and untied embeddings as in Hugging Face's
// meta-llama/Llama-3.1-405B config.json): 126 (2 h^2 + 2 h kv_dim + 3 h f +
// 2 h) + 2 V h + h = 405,853,388,800 parameters.
TEST(Zoo, LlamaAtAnotherShape) {
  const ModelShape shape{.layers = 126, .hidden = 16384, .heads = 128, .kv_heads = 8,
                         .ffn = 53248, .vocab = 128256, .positions = 8192};
  const Graph g = build_model("llama3-8b", {.batch = 1, .seq = 64, .shape = shape});
  EXPECT_EQ(param_count(g), 405'853'388'800u);
  EXPECT_EQ(g.name, "llama3-8b l126 h16384 a128 kv8 f53248 v128256 p8192 b1 s64 bf16");
}

}  // namespace
}  // namespace memwall
