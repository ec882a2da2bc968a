// Note [Tensor parallelism in the zoo] on the Llama models: one rank's
// parameters exactly (Megatron-LM's split of the query heads, the
// key-value groups and the SwiGLU MLP, its vocabulary padding to 128 t),
// the same collectives a layer as GPT-2's (Korthikanti et al. 2022, sec.
// 4.2.2: two all-gathers and two reduce-scatters forward with sequence
// parallelism, two all-reduces without, each mirrored in backward), and
// the layouts that do not split.
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

Graph llama_rank(const std::string& model, int64_t seq, int64_t t, bool sequence) {
  ModelOptions o;
  o.batch = 1;
  o.seq = seq;
  o.tensor_parallel = t;
  o.sequence_parallel = sequence;
  return build_model(model, o);
}

// Llama-2-70B (HF config.json: h 8192, 64 heads, 8 KV heads of 128, SwiGLU
// 28672, 80 layers, vocabulary 32,000, untied output): on one of 8 ranks
// 1/8 of every projection, of the MLP and of the vocabulary padded to
// 32,768; the RMSNorm weights whole.
TEST(TensorParallelLlama, ParametersOfOneRank) {
  const int64_t h = 8192, kv = 8 * 128, ffn = 28672, layers = 80, t = 8, vocab = 32768;
  const int64_t per_layer = (2 * h * h + 2 * kv * h) / t + 3 * h * ffn / t + 2 * h;
  const int64_t expected = layers * per_layer + 2 * (vocab / t) * h + h;
  const Graph g = llama_rank("llama2-70b", 256, t, true);
  EXPECT_EQ(param_count(g), static_cast<uint64_t>(expected));
  EXPECT_EQ(g.name, "llama2-70b b1 s256 bf16 tp8 sp");
  // One rank is the whole model (the zoo's published count).
  EXPECT_EQ(param_count(llama_rank("llama2-7b", 256, 1, false)), 6738415616u);
}

TEST(TensorParallelLlama, CommunicationVolumePerLayer) {
  const int64_t s = 256, h = 4096, t = 4;
  const double whole = 2.0 * s * h, share = 3.0 / 4.0;
  for (const bool sequence : {false, true}) {
    SCOPED_TRACE(sequence ? "sequence parallel" : "tensor parallel");
    const Graph g = llama_rank("llama2-7b", s, t, sequence);
    double sent = 0;
    int ops = 0;
    for (const Op& op : g.ops) {
      if (op.phase != Phase::kComm || !op.name.starts_with("layers.3.")) continue;
      EXPECT_TRUE(is_tensor_parallel_collective(op)) << op.name;
      sent += op.bytes;
      ++ops;
    }
    EXPECT_EQ(ops, sequence ? 10 : 4);
    EXPECT_DOUBLE_EQ(sent, (sequence ? 10 : 8) * share * whole);
  }
}

// Llama-2-70B's 8 key-value heads over 8 ranks leave one a rank, and
// Hugging Face's repeat_kv (expand, then reshape) is then a view: the
// attention matmuls read and save the rotated k and the v projection
// themselves, and the view's gradient is summed over the heads. At t = 4 (2
// a rank) it copies. Found measuring a 4-process run (docs/torch-layout.md).
TEST(TensorParallelLlama, OneKeyValueHeadARankIsAView) {
  const Graph one = llama_rank("llama2-70b", 256, 8, false);
  const Graph two = llama_rank("llama2-70b", 256, 4, false);
  EXPECT_NO_THROW(validate(one));
  const auto has_buffer = [](const Graph& g, const std::string& name) {
    for (const Buffer& b : g.buffers) {
      if (b.name == name) return true;
    }
    return false;
  };
  EXPECT_FALSE(has_buffer(one, "layers.0.attn.k_repeat"));
  EXPECT_FALSE(has_buffer(one, "layers.0.attn.v_repeat"));
  EXPECT_TRUE(has_buffer(two, "layers.0.attn.k_repeat"));
  int found = 0;
  for (const Op& op : one.ops) {
    found += op.name == "layers.0.attn.scores" || op.name == "layers.0.attn.k_repeat.bwd";
    if (op.name == "layers.0.attn.scores") {
      ASSERT_EQ(op.in.size(), 2u);
      EXPECT_EQ(one.buffers[op.in[1]].name, "layers.0.attn.rotary_k");
    }
    if (op.name == "layers.0.attn.k_repeat.bwd") {
      ASSERT_EQ(op.out.size(), 1u);
      EXPECT_EQ(one.buffers[op.out[0]].shape, (Dims{1, 1, 256, 128}));
    }
  }
  EXPECT_EQ(found, 2);
}

TEST(TensorParallelLlama, LayoutsThatDoNotSplitAreOneLine) {
  try {
    llama_rank("llama2-70b", 256, 16, false);
    ADD_FAILURE() << "8 key-value heads over 16 ranks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("8 key-value heads do not split over 16"),
              std::string::npos)
        << e.what();
  }
  ModelOptions moe;
  moe.tensor_parallel = 2;
  moe.expert_parallel = 3;  // 8 experts
  EXPECT_THROW(build_model("mixtral-8x7b", moe), Error);
  EXPECT_THROW(llama_rank("llama2-7b", 250, 4, true), Error);  // 250 positions over 4 ranks
}

}  // namespace
}  // namespace memwall
