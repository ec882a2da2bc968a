// LoRA adapters and NF4 base weights on the zoo's transformers (issue 24):
// trainable counts equal peft's, the base is frozen, gradients still reach
// every adapter, and NF4 weights take the bytes the QLoRA paper counts.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "graph_lookup.h"
#include "memwall/base/error.h"
#include "memwall/graph/counts.h"
#include "memwall/graph/graph.h"
#include "memwall/models/zoo.h"

namespace memwall {
namespace {

Graph build(const std::string& model, int64_t rank, const std::string& targets,
            WeightFormat base = WeightFormat::kDense) {
  ModelOptions o{.batch = 1, .seq = 128};
  o.lora.rank = rank;
  if (!targets.empty()) o.lora.targets = parse_lora_targets(targets);
  o.base_weights = base;
  Graph g = build_model(model, o);
  validate(g);
  return g;
}

// peft's print_trainable_parameters() for meta-llama/Llama-2-7b-hf with
// LoraConfig(r=8, target_modules=["q_proj", "v_proj"]) prints "trainable
// params: 4,194,304 || all params: 6,742,609,920 || trainable%:
// 0.0622", as public fine-tuning guides reproduce it. The other three
// follow from peft's adapter shapes (peft/tuners/lora/layer.py: lora_A is
// Linear(in, r), lora_B Linear(r, out), no biases): r x (in + out) per
// adapted projection, over 32 layers:
//   q,v:  2 x r x (4096 + 4096) x 32          -> 4,194,304 at r=8
//   all:  (4 x 8192 + 3 x 15104) x r x 32     -> 19,988,480 at r=8 (what
//         peft prints for 32-layer 4096/11008 models, OLMo-7B's too)
// and 8x both at r=64 (33,554,432 and 159,907,840).
TEST(Lora, Llama2TrainableCountsArePeftsCounts) {
  struct Case {
    int64_t rank;
    const char* targets;
    uint64_t trainable;
  };
  for (const Case& c : {Case{8, "q,v", 4194304}, Case{64, "q,v", 33554432},
                        Case{8, "all", 19988480}, Case{64, "all", 159907840}}) {
    SCOPED_TRACE(testing::Message() << "r=" << c.rank << " " << c.targets);
    const Graph g = build("llama2-7b", c.rank, c.targets);
    EXPECT_EQ(trainable_param_count(g), c.trainable);
    EXPECT_EQ(g.meta.at("trainable_param_count").get<uint64_t>(), c.trainable);
    // The base keeps Meta's 6,738,415,616 (tests/models/transformer_test.cc).
    EXPECT_EQ(model_param_count(g), 6738415616u + c.trainable);
    EXPECT_EQ(param_count(g), model_param_count(g));
  }
}

// GPT-2's attention is one fused projection (c_attn, [2304, 768]): peft
// adapts it whole, r x (768 + 2304) x 12 = 294,912 at r=8, as its GPT-2
// examples print; BERT's q and v: 2 x 8 x (768 + 768) x 12 = 294,912.
TEST(Lora, FusedAndSeparateProjections) {
  EXPECT_EQ(trainable_param_count(build("gpt2-small", 8, "q")), 294912u);
  EXPECT_EQ(trainable_param_count(build("gpt2-small", 8, "q,k,v")), 294912u);
  EXPECT_EQ(trainable_param_count(build("bert-base", 8, "q,v")), 294912u);
  EXPECT_EQ(trainable_param_count(build("gpt2-small", 8, "o")), 8u * (768 + 768) * 12);
}

TEST(Lora, TheBaseIsFrozenAndEveryAdapterGetsItsGradient) {
  const Graph g = build("llama2-7b", 8, "q,v");
  int steps = 0;
  for (const Op& op : g.ops) {
    if (op.phase != Phase::kOptimizer) continue;
    ++steps;
    for (BufferId b : op.updates) {
      const Buffer& buf = g.buffers[b];
      if (buf.kind == BufferKind::kParam) {
        EXPECT_NE(buf.name.find(".lora_"), std::string::npos);
      }
    }
  }
  EXPECT_EQ(steps, 32 * 2 * 2);  // A and B of q and v in 32 layers
  for (const Buffer& b : g.buffers) {
    if (b.kind == BufferKind::kGrad) {
      EXPECT_NE(b.name.find(".lora_"), std::string::npos) << b.name;
    }
  }
  // No weight-gradient kernel runs for a frozen weight; the input gradient
  // still flows through it (layer 0's q adapter sits below wo, w1, ...).
  EXPECT_EQ(find_op(g, "layers.0.attn.wq.bwd_weight"), nullptr);
  EXPECT_NE(find_op(g, "layers.0.attn.wq.lora_A.bwd_weight"), nullptr);
  EXPECT_NE(find_op(g, "layers.1.attn.wo.bwd_input"), nullptr);
  EXPECT_NE(find_buffer(g, "layers.0.attn.wq.lora_A.weight.grad"), nullptr);
  // Nothing below the first adapter needs a gradient: the embedding's
  // backward does not run.
  EXPECT_EQ(find_op(g, "tok_embeddings.bwd"), nullptr);
}

TEST(Lora, AdaptersChangeTheGraphsName) {
  EXPECT_EQ(build("llama2-7b", 8, "q,v").name, "llama2-7b b1 s128 bf16 lora8");
  EXPECT_EQ(build("llama2-7b", 64, "all", WeightFormat::kNf4).name,
            "llama2-7b b1 s128 bf16 qlora64");
}

// QLoRA (Dettmers et al. 2023, sec. 3, "Double Quantization"): NF4 codes
// take 4 bits per parameter, the 8-bit absmax of each 64-block 8/64 bits
// and the fp32 absmax of each 256 of those 32/(64*256) bits: 4.127 bits.
// Llama-2-7B's quantized weights are its 32 x 7 projections,
// 32 x (4 x 4096^2 + 3 x 4096 x 11008) = 6,476,005,376 parameters (the
// embedding, the norms and the output head stay in 16 bits, as
// bitsandbytes leaves them).
TEST(Nf4, Llama2BaseWeightsTakeThePapersBytes) {
  const uint64_t n = 6476005376;
  EXPECT_EQ(n % 16384, 0u);
  const uint64_t expected = n / 2 + n / 64 + 4 * (n / 64 / 256);
  EXPECT_EQ(expected, 3340771328u);

  const Graph g = build("llama2-7b", 64, "all", WeightFormat::kNf4);
  uint64_t quantized = 0, dense_frozen = 0;
  for (const Buffer& b : g.buffers) {
    if (b.kind != BufferKind::kParam || b.name.find(".lora_") != std::string::npos) continue;
    if (b.dtype == DType::kU8 || b.name.ends_with(".absmax2")) {
      quantized += b.bytes;
    } else {
      dense_frozen += b.bytes;
    }
  }
  EXPECT_EQ(quantized, expected);
  // Embedding and head 2 x 32000 x 4096, 65 RMSNorm scales of 4096, in bf16.
  EXPECT_EQ(dense_frozen, 2u * (2 * 32000 * 4096 + 65 * 4096));
  // The model still has its 6.74B parameters (plus the adapters).
  EXPECT_EQ(model_param_count(g), 6738415616u + 159907840u);
}

// Note [NF4 weights]: each quantized matmul dequantizes into a temporary
// that only that matmul reads, in forward and again in backward.
TEST(Nf4, EveryMatmulDequantizesIntoATemporary) {
  const Graph g = build("llama2-7b", 64, "all", WeightFormat::kNf4);
  const Op* fwd = find_op(g, "layers.3.mlp.w2.dequantize");
  const Op* bwd = find_op(g, "layers.3.mlp.w2.bwd_dequantize");
  ASSERT_NE(fwd, nullptr);
  ASSERT_NE(bwd, nullptr);
  for (const Op* op : {fwd, bwd}) {
    ASSERT_EQ(op->out.size(), 1u);
    const Buffer& w = g.buffers[op->out[0]];
    EXPECT_EQ(w.kind, BufferKind::kTemp);
    EXPECT_EQ(w.bytes, 2u * 4096 * 11008);
    int readers = 0;
    for (const Op& o : g.ops) {
      for (BufferId b : o.in) readers += b == w.id ? 1 : 0;
    }
    EXPECT_EQ(readers, 1) << op->name;
  }
  // The output head is not quantized.
  EXPECT_EQ(find_op(g, "output.dequantize"), nullptr);
}

TEST(Lora, BadOptionsAreRefused) {
  EXPECT_THROW(build("resnet50", 8, "q,v"), Error);
  EXPECT_THROW(build("gpt2-small", 8, "gate"), Error);  // GPT-2 has no gate projection
  EXPECT_THROW(build("llama2-7b", 0, "", WeightFormat::kNf4), Error);  // nothing would train
  EXPECT_THROW(build("llama2-7b", int64_t{1} << 20, "q"), Error);
  EXPECT_THROW(parse_lora_targets("q,x"), Error);
  EXPECT_THROW(parse_lora_targets("q,q"), Error);
  EXPECT_THROW(parse_lora_targets(""), Error);
  EXPECT_EQ(parse_lora_targets("all").size(), 7u);
  ModelOptions forward{.batch = 1, .seq = 128, .forward_only = true};
  forward.base_weights = WeightFormat::kNf4;  // 4-bit inference needs no adapters
  EXPECT_NO_THROW(build_model("llama2-7b", forward));
}

}  // namespace
}  // namespace memwall
