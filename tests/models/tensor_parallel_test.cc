// Note [Tensor parallelism in the zoo] (src/models/tensor_parallel.cc): one
// rank's graph of a GPT-2 under Megatron-LM's tensor parallelism, with and
// without sequence parallelism, against Korthikanti et al. 2022
// ("Reducing Activation Recomputation in Large Transformer Models"), sec.
// 4.2: a layer stores sbh(10 + 24/t + 5as/(ht)) bytes with t-way tensor
// parallelism (eq. 2) and sbh/t (34 + 5as/h) with sequence parallelism too
// (eq. 3). As for eq. 1 (transformer_test.cc), PyTorch's LayerNorm also
// saves fp32 mean and rstd per row: 16sb bytes a layer, 16sb/t when the
// norms run on the rank's s/t rows.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/graph/counts.h"
#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"

namespace memwall {
namespace {

Graph gpt2(const std::string& model, int64_t batch, int64_t seq, int64_t t, bool sequence) {
  ModelOptions o;
  o.batch = batch;
  o.seq = seq;
  o.tensor_parallel = t;
  o.sequence_parallel = sequence;
  return build_model(model, o);
}

struct TpShape {
  const char* model;
  int64_t s, b, h, a, layers;
};
constexpr TpShape kTpShapes[] = {
    {"gpt2-small", 128, 1, 768, 12, 12},
    {"gpt2-medium", 256, 2, 1024, 16, 24},
    {"gpt2-large", 512, 1, 1280, 20, 36},
};

// Every layer of every shape at t = 2 and 4 saves `expected(sbh, as^2b, sb, t)`.
template <typename Expected>
void expect_saved_per_layer(bool sequence, Expected expected) {
  for (const TpShape& x : kTpShapes) {
    for (const int64_t t : {2, 4}) {
      SCOPED_TRACE(fmt::format("{} s={} b={} t={}", x.model, x.s, x.b, t));
      const Graph g = gpt2(x.model, x.b, x.s, t, sequence);
      EXPECT_NO_THROW(validate(g));
      const auto sbh = static_cast<uint64_t>(x.s * x.b * x.h);
      const auto as2b = static_cast<uint64_t>(x.a * x.s * x.s * x.b);
      const auto sb = static_cast<uint64_t>(x.s * x.b);
      for (int64_t i = 0; i < x.layers; ++i) {
        EXPECT_EQ(saved_activation_bytes(g, fmt::format("h{}.", i)),
                  expected(sbh, as2b, sb, static_cast<uint64_t>(t)))
            << "layer " << i;
      }
    }
  }
}

TEST(TensorParallel, KorthikantiEq2PerLayerExactly) {
  // Eq. 2 plus the replicated LayerNorm statistics.
  expect_saved_per_layer(false, [](uint64_t sbh, uint64_t as2b, uint64_t sb, uint64_t t) {
    return 10 * sbh + 24 * sbh / t + 5 * as2b / t + 16 * sb;
  });
}

TEST(TensorParallel, KorthikantiEq3WithSequenceParallelism) {
  // Eq. 3 plus the statistics of the rank's s/t rows.
  expect_saved_per_layer(true, [](uint64_t sbh, uint64_t as2b, uint64_t sb, uint64_t t) {
    return (34 * sbh + 5 * as2b) / t + 16 * sb / t;
  });
}

// Per layer and rank, a ring collective sends (t-1)/t of its whole buffer
// (twice for an all-reduce). Tensor parallelism alone all-reduces the two
// row-parallel outputs in forward and the two column-parallel inputs'
// gradients in backward, [b, s, h] in bf16 each: 8 (t-1)/t 2sbh. Sequence
// parallelism turns each all-reduce into a reduce-scatter and an
// all-gather (the same volume) and gathers the two column-parallel inputs
// again in backward: 10 (t-1)/t 2sbh (Korthikanti et al., sec. 4.2.2).
TEST(TensorParallel, CommunicationVolumePerLayer) {
  const int64_t s = 256, b = 2, h = 768, t = 4;
  const double whole = 2.0 * s * b * h, share = 3.0 / 4.0;
  for (const bool sequence : {false, true}) {
    SCOPED_TRACE(sequence ? "sequence parallel" : "tensor parallel");
    const Graph g = gpt2("gpt2-small", b, s, t, sequence);
    EXPECT_EQ(graph_tensor_parallel(g), 4);
    double sent = 0;
    int ops = 0;
    for (const Op& op : g.ops) {
      if (op.phase != Phase::kComm || !op.name.starts_with("h3.")) continue;
      EXPECT_TRUE(is_tensor_parallel_collective(op)) << op.name;
      sent += op.bytes;
      ++ops;
    }
    EXPECT_EQ(ops, sequence ? 10 : 4);
    EXPECT_DOUBLE_EQ(sent, (sequence ? 10 : 8) * share * whole);
  }
}

// A rank holds 1/t of every matmul's weight and of the (padded)
// vocabulary; the norms, the position table and the row-parallel biases
// are whole on every rank. Megatron pads GPT-2's 50,257 tokens to a
// multiple of 128 t (50,688 for t = 4).
TEST(TensorParallel, ParametersOfOneRank) {
  const int64_t h = 768, layers = 12, t = 4, vocab = 50688;
  const Graph g = gpt2("gpt2-small", 1, 128, t, true);
  const int64_t per_layer = (3 * h * h + 3 * h) / t + (h * h) / t + h + (4 * h * h + 4 * h) / t +
                            (4 * h * h) / t + h + 4 * h;
  const int64_t expected = layers * per_layer + vocab / t * h + 1024 * h + 2 * h;
  EXPECT_EQ(param_count(g), static_cast<uint64_t>(expected));
  EXPECT_EQ(g.name, "gpt2-small b1 s128 bf16 tp4 sp");
  EXPECT_EQ(g.meta.at("sequence_parallel"), true);
  // One rank is the whole model.
  EXPECT_EQ(param_count(gpt2("gpt2-small", 1, 128, 1, false)), 124439808u);
}

TEST(TensorParallel, CollectivesAreTimedOverTheTensorParallelRanks) {
  const Graph g = gpt2("gpt2-small", 2, 256, 4, false);
  const Hardware& hw = find_gpu("a100-80g");
  for (const Op& op : g.ops) {
    if (op.phase != Phase::kComm) continue;
    EXPECT_DOUBLE_EQ(op_time(hw, g, op), collective_time(hw, collective_of(op), op.bytes, 4))
        << op.name;
  }
}

// The tensor-parallel ranks of a node share its host with the
// data-parallel ones (Note [Ranks on a node] in src/hw/ranks.cc).
TEST(TensorParallel, RanksShareTheNodesHost) {
  Graph g = gpt2("gpt2-small", 1, 128, 4, false);
  const Hardware& hw = find_gpu("a100-80g");  // 8 GPUs a node
  EXPECT_EQ(graph_gpus(g), 4);
  EXPECT_EQ(rank_share(hw, graph_gpus(g)).host_memory_bytes, hw.host_memory_bytes / 4);
  g.meta["zero"] = {{"ranks", 4}};
  EXPECT_EQ(graph_gpus(g), 16);
  EXPECT_EQ(rank_share(hw, graph_gpus(g)).host_memory_bytes, hw.host_memory_bytes / 8);
}

TEST(TensorParallel, BadLayoutsAreOneLine) {
  const auto error = [](int64_t t, bool sequence, const std::string& model = "gpt2-small",
                        int64_t seq = 128) {
    try {
      gpt2(model, 1, seq, t, sequence);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error(3, false),
            "model gpt2-small: tensor-parallel ranks must be a power of two up to 1024 (got 3)");
  EXPECT_EQ(error(1, true),
            "model gpt2-small: sequence parallelism splits the sequence over tensor-parallel "
            "ranks: give --tensor-parallel 2 or more");
  // GPT-2 small has 12 heads.
  EXPECT_EQ(error(8, false),
            "model gpt2-small: 12 attention heads do not split over 8 "
            "tensor-parallel ranks");
  EXPECT_EQ(error(4, true, "gpt2-small", 126),
            "model gpt2-small: 126 sequence positions do not split over 4 "
            "tensor-parallel ranks");
  EXPECT_EQ(error(2, false, "bert-base", 128),
            "model bert-base: tensor parallelism is built for the GPT-2, Llama and Mixtral models so "
            "far");
}

}  // namespace
}  // namespace memwall
