// Golden and structural tests of the transformer builders (gpt2.cc, llama.cc,
// mixtral.cc, bert.cc, attention.cc). Shapes stay small (batch 1, seq 128)
// unless a formula needs more; graph building does not depend on the size of
// the tensors, only on the number of ops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "graph_lookup.h"
#include "memwall/graph/counts.h"
#include "memwall/graph/graph.h"
#include "memwall/graph/versions.h"
#include "memwall/models/zoo.h"

namespace memwall {
namespace {

constexpr int kParam = static_cast<int>(BufferKind::kParam);
constexpr int kGrad = static_cast<int>(BufferKind::kGrad);
constexpr int kOptim = static_cast<int>(BufferKind::kOptimState);

Graph build_transformer(const std::string& model, int64_t batch, int64_t seq,
                        Precision precision = Precision::kBf16,
                        Optimizer optimizer = Optimizer::kAdam, bool flash = false) {
  ModelOptions o;
  o.batch = batch;
  o.seq = seq;
  o.precision = precision;
  o.optimizer = optimizer;
  o.flash = flash;
  return build_model(model, o);
}

// Names of the buffers an op reads, sorted.
std::vector<std::string> reads(const Graph& g, const Op& op) {
  std::vector<std::string> names;
  for (BufferId b : op.in) names.push_back(g.buffers[b].name);
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> transformers() {
  std::vector<std::string> names;
  for (const ModelInfo& m : model_zoo()) {
    if (m.family != ModelFamily::kCnn) names.push_back(m.name);
  }
  return names;
}

// ---- Parameter counts ---------------------------------------------------------
//
// Sources:
//   GPT-2: Radford et al. 2019, "Language Models are Unsupervised Multitask
//     Learners", table 2 (rounded sizes); exact counts from Hugging Face
//     transformers GPT2LMHeadModel (config.json of gpt2, gpt2-medium,
//     gpt2-large, gpt2-xl), sum(p.numel() for p in model.parameters()), the
//     LM head tied to wte and counted once.
//   Llama 2: Touvron et al. 2023, "Llama 2: Open Foundation and Fine-Tuned
//     Chat Models", table 1; exact counts from the HF model cards /
//     safetensors metadata of meta-llama/Llama-2-{7b,13b,70b}-hf.
//   Llama 3 8B: HF meta-llama/Meta-Llama-3-8B (8,030,261,248).
//   Mixtral 8x7B: Jiang et al. 2024, "Mixtral of Experts" (46.7B total);
//     exact count from HF mistralai/Mixtral-8x7B-v0.1.
//   BERT: Devlin et al. 2019 (110M / 340M); exact counts from HF
//     BertForPreTraining on bert-base-uncased / bert-large-uncased configs
//     (BertModel alone: 109,482,240 / 335,141,888; the pre-training heads add
//     the MLM transform, its LayerNorm, the decoder bias and the NSP head).
struct PublishedCount {
  const char* model;
  int64_t params;
};
constexpr PublishedCount kPublished[] = {
    {"gpt2-small", 124439808},   {"gpt2-medium", 354823168}, {"gpt2-large", 774030080},
    {"gpt2-xl", 1557611200},     {"llama2-7b", 6738415616},  {"llama2-13b", 13015864320},
    {"llama2-70b", 68976648192}, {"llama3-8b", 8030261248},  {"mixtral-8x7b", 46702792704},
    {"bert-base", 110106428},    {"bert-large", 336226108},
};

TEST(TransformerParams, EveryBuilderHasThePublishedCount) {
  for (const PublishedCount& p : kPublished) {
    SCOPED_TRACE(p.model);
    Graph g = build_transformer(p.model, 1, 128);
    EXPECT_NO_THROW(validate(g));
    EXPECT_EQ(param_count(g), static_cast<uint64_t>(p.params));
    EXPECT_EQ(find_model(p.model).param_count, p.params);
  }
  EXPECT_EQ(transformers().size(), std::size(kPublished));
}

TEST(TransformerParams, BertModelWithoutHeads) {
  // BertModel = BertForPreTraining minus cls.* (the decoder weight is tied).
  for (const auto& [model, bert_model] :
       {std::pair<const char*, uint64_t>{"bert-base", 109482240},
        std::pair<const char*, uint64_t>{"bert-large", 335141888}}) {
    Graph g = build_transformer(model, 1, 128);
    uint64_t heads = 0;
    for (const Buffer& b : g.buffers) {
      if (b.kind == BufferKind::kParam && b.name.starts_with("cls.")) heads += element_count(b);
    }
    EXPECT_EQ(param_count(g) - heads, bert_model) << model;
  }
}

// ---- Korthikanti et al. 2022, eq. 1 ------------------------------------------
//
// "Reducing Activation Recomputation in Large Transformer Models", sec. 4.1:
// with 16-bit activations, dropout and no recomputation, one transformer layer
// stores sbh(34 + 5as/h) bytes = 34sbh + 5as^2b: attention 11sbh + 5as^2b
// (QKV input 2sbh, Q and K 4sbh, softmax output 2as^2b, its dropout mask
// as^2b and output 2as^2b, V 2sbh, projection input 2sbh, dropout mask sbh),
// MLP 19sbh (2sbh + 8sbh + 8sbh + sbh), two LayerNorm inputs 4sbh.
// Eq. 1 leaves out the LayerNorms' per-row statistics that PyTorch's
// native_layer_norm saves for backward: mean and rstd, fp32, [s, b] each,
// two LayerNorms: 2 * 2 * 4sb = 16sb bytes. A layer's residual output is the
// next layer's (or ln_f's) LayerNorm input; it carries the producing layer's
// prefix, so each layer counts exactly one LayerNorm-1 input's worth.
//
// BERT's post-LN layer stores the same tensors in another order (its
// LayerNorm inputs are the residual sums, its layer input is the previous
// layer's LayerNorm output), so eq. 1 holds for it too.
struct TransformerShape {
  const char* model;
  int64_t s, b, h, a, layers;
  const char* prefix;  // layer i's buffers start with fmt::format(prefix, i)
};
constexpr TransformerShape kShapes[] = {
    {"gpt2-small", 128, 1, 768, 12, 12, "h{}."},
    {"gpt2-small", 1024, 4, 768, 12, 12, "h{}."},
    {"gpt2-medium", 256, 2, 1024, 16, 24, "h{}."},
    {"gpt2-large", 512, 1, 1280, 20, 36, "h{}."},
    {"gpt2-xl", 64, 3, 1600, 25, 48, "h{}."},
    {"bert-base", 512, 2, 768, 12, 12, "encoder.layer.{}."},
    {"bert-large", 128, 1, 1024, 16, 24, "encoder.layer.{}."},
};

TEST(TransformerKorthikanti, Eq1PerLayerExactly) {
  for (const TransformerShape& x : kShapes) {
    SCOPED_TRACE(fmt::format("{} s={} b={}", x.model, x.s, x.b));
    Graph g = build_transformer(x.model, x.b, x.s);
    const uint64_t sbh = static_cast<uint64_t>(x.s * x.b * x.h);
    const uint64_t eq1 = 34 * sbh + 5 * static_cast<uint64_t>(x.a * x.s * x.s * x.b);
    const uint64_t ln_stats = 16 * static_cast<uint64_t>(x.s * x.b);
    for (int64_t i = 0; i < x.layers; ++i) {
      EXPECT_EQ(saved_activation_bytes(g, fmt::format(fmt::runtime(x.prefix), i)), eq1 + ln_stats)
          << "layer " << i;
    }
  }
}

TEST(TransformerKorthikanti, FlashAttentionDropsTheQuadraticTerm) {
  // FlashAttention-2 saves Q, K, V (the fused QKV buffer), its output (which
  // is also the projection's input) and the fp32 logsumexp [b, a, s]; its
  // dropout keeps only the RNG state. So the 5as^2b term becomes 4asb, and
  // the 34sbh + 16sb of eq. 1 stay.
  for (const TransformerShape& x : kShapes) {
    SCOPED_TRACE(fmt::format("{} s={} b={}", x.model, x.s, x.b));
    Graph g =
        build_transformer(x.model, x.b, x.s, Precision::kBf16, Optimizer::kAdam, /*flash=*/true);
    EXPECT_NO_THROW(validate(g));
    const uint64_t sb = static_cast<uint64_t>(x.s * x.b);
    const uint64_t expected = 34 * sb * x.h + 16 * sb + 4 * static_cast<uint64_t>(x.a) * sb;
    for (int64_t i = 0; i < x.layers; ++i) {
      EXPECT_EQ(saved_activation_bytes(g, fmt::format(fmt::runtime(x.prefix), i)), expected)
          << "layer " << i;
    }
    // No s x s tensor anywhere (when s equals the head dim, [b, a, s, d]
    // gradients look alike, so look only where the shapes differ).
    if (x.s != x.h / x.a) {
      for (const Buffer& b : g.buffers) {
        EXPECT_NE(b.shape, (std::vector<int64_t>{x.b, x.a, x.s, x.s})) << b.name;
      }
    }
  }
}

// The same derivation for the Llama block (bf16, no dropout, RMSNorm saving
// its input and an fp32 rstd per row), per layer, with f the MLP width and
// kv the KV heads:
//   plain: residual input 2sbh (counted as above), attention_norm output 2sbh
//          (read by wq/wk/wv), Q after rotary 2sbh, K and V as the matmuls
//          read them 2sbh each (repeat_kv copies under GQA), softmax output
//          2as^2b, context 2sbh, attention residual 2sbh (ffn_norm input),
//          ffn_norm output 2sbh, SwiGLU w1 output, silu output, w3 output and
//          their product 2sbf each, two rstd 8sb: 16sbh + 8sbf + 2as^2b + 8sb.
//   flash: K and V are the unexpanded kv-head tensors (2sbh * kv/a each) and
//          the softmax output becomes the fp32 logsumexp 4asb:
//          12sbh + 4sbh * kv/a + 8sbf + 4asb + 8sb.
TEST(TransformerKorthikanti, LlamaBlockPerLayer) {
  struct Case {
    const char* model;
    int64_t s, b, h, a, kv, f, layers;
  };
  for (const Case& c : {Case{"llama2-7b", 128, 1, 4096, 32, 32, 11008, 32},
                        Case{"llama2-70b", 256, 2, 8192, 64, 8, 28672, 80},
                        Case{"llama3-8b", 64, 3, 4096, 32, 8, 14336, 32}}) {
    const uint64_t sb = static_cast<uint64_t>(c.s * c.b), sbh = sb * c.h, sbf = sb * c.f;
    const uint64_t kv_part = 2 * sbh / static_cast<uint64_t>(c.a) * c.kv;
    const uint64_t plain = 16 * sbh + 8 * sbf + 2 * static_cast<uint64_t>(c.a * c.s) * sb + 8 * sb;
    const uint64_t flash = 12 * sbh + 2 * kv_part + 8 * sbf + 4 * c.a * sb + 8 * sb;
    for (bool use_flash : {false, true}) {
      SCOPED_TRACE(fmt::format("{} flash={}", c.model, use_flash));
      Graph g = build_transformer(c.model, c.b, c.s, Precision::kBf16, Optimizer::kAdam, use_flash);
      for (int64_t i = 0; i < c.layers; ++i) {
        EXPECT_EQ(saved_activation_bytes(g, fmt::format("layers.{}.", i)),
                  use_flash ? flash : plain)
            << "layer " << i;
      }
    }
  }
}

// Mixtral: the Llama GQA attention half, then the MoE block: ffn_norm output
// 2sbh and rstd 4sb, fp32 router probabilities 4NE, routing weights 2Nk and
// int64 indices 8Nk, per expert (n_e = ceil(Nk/E) tokens) its gathered
// tokens 2n_e*h, SwiGLU 8n_e*f, and its output 2n_e*h (read by the routing
// weight's gradient); the scaled output and the combined output are not
// saved. N = sb.
TEST(TransformerKorthikanti, MixtralBlockPerLayer) {
  const uint64_t s = 128, b = 2, h = 4096, a = 32, f = 14336, e = 8, k = 2;
  const uint64_t n = s * b, sbh = n * h, per_expert = (n * k + e - 1) / e;
  const uint64_t attention = 12 * sbh + 2 * a * s * s * b + 4 * n;
  const uint64_t moe = 4 * sbh + 4 * n + 4 * n * e + 10 * n * k + e * per_expert * (4 * h + 8 * f);
  Graph g = build_transformer("mixtral-8x7b", static_cast<int64_t>(b), static_cast<int64_t>(s));
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(saved_activation_bytes(g, fmt::format("layers.{}.", i)), attention + moe)
        << "layer " << i;
  }
}

// ---- Model states (ZeRO, Rajbhandari et al. 2020, sec. 3.1) --------------------

TEST(TransformerModelStates, BytesPerParameter) {
  struct Case {
    Precision precision;
    Optimizer optimizer;
    uint64_t param, grad, optim;  // bytes per parameter
  };
  // Mixed-precision Adam: 2 + 2 + 12 (fp32 master, momentum, variance).
  const Case cases[] = {
      {Precision::kBf16, Optimizer::kAdam, 2, 2, 12},
      {Precision::kFp16, Optimizer::kAdamW, 2, 2, 12},
      {Precision::kBf16, Optimizer::kSgd, 2, 2, 4},
      {Precision::kFp32, Optimizer::kAdam, 4, 4, 8},
      {Precision::kFp32, Optimizer::kAdamW, 4, 4, 8},
      {Precision::kFp32, Optimizer::kSgd, 4, 4, 0},
      {Precision::kFp32, Optimizer::kMomentum, 4, 4, 4},
  };
  for (const char* model : {"gpt2-small", "llama2-7b", "mixtral-8x7b", "bert-base"}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(fmt::format("{} {} {}", model, to_string(c.precision), to_string(c.optimizer)));
      Graph g = build_transformer(model, 1, 128, c.precision, c.optimizer);
      const uint64_t p = param_count(g);
      const MemorySummary s = memory_summary(g);
      EXPECT_EQ(s.bytes_by_kind[kParam], c.param * p);
      EXPECT_EQ(s.bytes_by_kind[kGrad], c.grad * p);
      EXPECT_EQ(s.bytes_by_kind[kOptim], c.optim * p);
    }
  }
}

// ---- Every configuration validates; the peak exceeds the model states -------

TEST(TransformerGraphs, ValidateWithFinitePeakAboveModelStates) {
  for (const std::string& model : transformers()) {
    for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
      for (bool flash : {false, true}) {
        SCOPED_TRACE(fmt::format("{} {} flash={}", model, to_string(precision), flash));
        Graph g = build_transformer(model, 1, 128, precision, Optimizer::kAdam, flash);
        ASSERT_NO_THROW(validate(g));
        const MemorySummary s = memory_summary(g);
        const uint64_t states =
            s.bytes_by_kind[kParam] + s.bytes_by_kind[kGrad] + s.bytes_by_kind[kOptim];
        const MemoryProfile prof = memory_profile(g);
        EXPECT_GT(prof.peak_bytes, states);
        EXPECT_LT(prof.peak_bytes, kMaxBytes);
        EXPECT_GT(s.saved_activation_bytes, 0u);
      }
    }
  }
}

TEST(TransformerGraphs, OpAndBufferNamesAreUnique) {
  for (const std::string& model : transformers()) {
    for (bool flash : {false, true}) {
      Graph g = build_transformer(model, 1, 64, Precision::kBf16, Optimizer::kAdam, flash);
      std::set<std::string> ops, buffers;
      for (const Op& op : g.ops)
        EXPECT_TRUE(ops.insert(op.name).second) << model << " op " << op.name;
      for (const Buffer& b : g.buffers) {
        EXPECT_TRUE(buffers.insert(b.name).second) << model << " buffer " << b.name;
      }
    }
  }
}

// ---- FLOPs ------------------------------------------------------------------

TEST(TransformerFlops, MatmulsAreTwoMnk) {
  const int64_t b = 2, s = 128, h = 4096, a = 32, d = 128, ffn = 11008, vocab = 32000;
  const double n = static_cast<double>(b * s);
  Graph g = build_transformer("llama2-7b", b, s);
  const auto flops = [&](const char* name) {
    const Op* op = find_op(g, name);
    EXPECT_NE(op, nullptr) << name;
    return op == nullptr ? -1.0 : op->flops;
  };
  EXPECT_EQ(flops("layers.0.attn.wq"), 2 * n * h * h);
  EXPECT_EQ(flops("layers.0.attn.wq.bwd_input"), 2 * n * h * h);
  EXPECT_EQ(flops("layers.0.attn.wq.bwd_weight"), 2 * n * h * h);
  EXPECT_EQ(flops("layers.5.mlp.w1"), 2 * n * h * ffn);
  EXPECT_EQ(flops("layers.5.mlp.w2"), 2 * n * ffn * h);
  EXPECT_EQ(flops("output"), 2 * n * h * vocab);
  // Batched: b*a products of [s, d] x [d, s] and [s, s] x [s, d].
  const double attn = 2.0 * static_cast<double>(b * a) * static_cast<double>(s * s * d);
  EXPECT_EQ(flops("layers.0.attn.scores"), attn);
  EXPECT_EQ(flops("layers.0.attn.context"), attn);
  EXPECT_EQ(flops("layers.0.attn.scores.bwd_q"), attn);

  // Flash: both matmuls, halved by causal block skipping; backward 2.5x.
  Graph f = build_transformer("llama2-7b", b, s, Precision::kBf16, Optimizer::kAdam, true);
  const Op* fwd = find_op(f, "layers.0.attn.flash");
  const Op* bwd = find_op(f, "layers.0.attn.flash.bwd");
  ASSERT_TRUE(fwd && bwd);
  EXPECT_EQ(fwd->flops, attn);
  EXPECT_EQ(bwd->flops, 2.5 * attn);
}

// ---- What backward reads ------------------------------------------------------

TEST(TransformerBackward, PlainAttentionReadsExactlyWhatTheKernelsNeed) {
  Graph g = build_transformer("gpt2-small", 1, 128);
  const auto op = [&](const std::string& name) {
    const Op* o = find_op(g, name);
    EXPECT_NE(o, nullptr) << name;
    return o;
  };
  const auto kind = [&](BufferId id) { return g.buffers[id].kind; };
  // dP_d = G V^T reads the gradient and V (a view of the fused QKV buffer).
  const Op* dp = op("h3.attn.context.bwd_probs");
  ASSERT_EQ(dp->in.size(), 2u);
  EXPECT_EQ(kind(dp->in[0]), BufferKind::kTemp);
  EXPECT_EQ(g.buffers[dp->in[1]].name, "h3.attn.qkv");
  // dV = P_d^T G.
  const Op* dv = op("h3.attn.context.bwd_v");
  EXPECT_EQ(g.buffers[dv->in[0]].name, "h3.attn.probs_dropout");
  EXPECT_EQ(kind(dv->in[1]), BufferKind::kTemp);
  EXPECT_EQ(reads(g, *op("h3.attn.probs_dropout.bwd"))[0], "h3.attn.grad_probs");
  EXPECT_EQ(g.buffers[op("h3.attn.probs_dropout.bwd")->in[1]].name, "h3.attn.probs_dropout.mask");
  EXPECT_EQ(g.buffers[op("h3.attn.softmax.bwd")->in[1]].name, "h3.attn.probs");
  EXPECT_EQ(g.buffers[op("h3.attn.scores.bwd_q")->in[1]].name, "h3.attn.qkv");  // K
  EXPECT_EQ(g.buffers[op("h3.attn.scores.bwd_k")->in[1]].name, "h3.attn.qkv");  // Q
  // The scores are transient: only the softmax reads them.
  const Buffer* scores = find_buffer(g, "h3.attn.scores");
  ASSERT_NE(scores, nullptr);
  for (const Op& o : g.ops) {
    if (std::find(o.in.begin(), o.in.end(), scores->id) != o.in.end()) {
      EXPECT_EQ(o.name, "h3.attn.softmax");
    }
  }
  // The mask is one byte per element of [b, a, s, s].
  EXPECT_EQ(find_buffer(g, "h3.attn.probs_dropout.mask")->bytes, 12u * 128 * 128);
  // SplitBackward: dQ, dK, dV concatenated into the fused gradient.
  const Op* cat = op("h3.attn.qkv_grad_cat");
  EXPECT_EQ(cat->type, "cat");
  EXPECT_EQ(reads(g, *cat),
            (std::vector<std::string>{"h3.attn.grad_k", "h3.attn.grad_q", "h3.attn.grad_v"}));
  EXPECT_EQ(g.buffers[cat->out.at(0)].shape, (std::vector<int64_t>{1, 128, 3 * 768}));
  const Op* qkv_bwd = op("h3.attn.qkv.bwd_input");
  EXPECT_EQ(qkv_bwd->in[0], cat->out[0]);
}

TEST(TransformerBackward, FlashReadsQkvOutputAndLogsumexp) {
  Graph g = build_transformer("gpt2-small", 1, 128, Precision::kBf16, Optimizer::kAdam, true);
  const Op* bwd = find_op(g, "h0.attn.flash.bwd");
  ASSERT_NE(bwd, nullptr);
  // The output gradient (a temp), then Q, K, V (one fused buffer), O and lse.
  ASSERT_EQ(bwd->in.size(), 4u);
  EXPECT_EQ(g.buffers[bwd->in[0]].kind, BufferKind::kTemp);
  std::vector<std::string> r = reads(g, *bwd);
  for (const char* saved : {"h0.attn.qkv", "h0.attn.context", "h0.attn.lse"}) {
    EXPECT_NE(std::find(r.begin(), r.end(), saved), r.end()) << saved;
  }
  EXPECT_EQ(find_buffer(g, "h0.attn.lse")->dtype, DType::kF32);
  EXPECT_EQ(find_buffer(g, "h0.attn.lse")->shape, (std::vector<int64_t>{1, 12, 128}));
  EXPECT_GT(bwd->workspace, 0u);  // fp32 dQ accumulator
  EXPECT_EQ(find_op(g, "h0.attn.softmax"), nullptr);
}

TEST(TransformerBackward, RotaryReadsOnlyGradientAndTables) {
  Graph g = build_transformer("llama2-7b", 1, 128);
  for (const char* name : {"layers.0.attn.rotary_q.bwd", "layers.0.attn.rotary_k.bwd"}) {
    const Op* op = find_op(g, name);
    ASSERT_NE(op, nullptr) << name;
    ASSERT_EQ(op->in.size(), 3u);
    EXPECT_EQ(g.buffers[op->in[0]].kind, BufferKind::kTemp);
    EXPECT_EQ(g.buffers[op->in[1]].name, "rope.cos");
    EXPECT_EQ(g.buffers[op->in[2]].name, "rope.sin");
  }
  EXPECT_EQ(find_buffer(g, "rope.cos")->kind, BufferKind::kInput);
  EXPECT_EQ(find_buffer(g, "rope.cos")->shape, (std::vector<int64_t>{128, 128}));
}

// ---- Grouped-query attention ----------------------------------------------------

TEST(TransformerGqa, KeyValueProjectionShapes) {
  struct Case {
    const char* model;
    int64_t h, heads, kv_heads;
  };
  for (const Case& c : {Case{"llama2-70b", 8192, 64, 8}, Case{"llama3-8b", 4096, 32, 8},
                        Case{"mixtral-8x7b", 4096, 32, 8}, Case{"llama2-7b", 4096, 32, 32}}) {
    SCOPED_TRACE(c.model);
    const int64_t d = 128, s = 128;
    Graph g = build_transformer(c.model, 1, s);
    EXPECT_EQ(find_buffer(g, "layers.0.attn.wq.weight")->shape,
              (std::vector<int64_t>{c.heads * d, c.h}));
    for (const char* w : {"layers.0.attn.wk.weight", "layers.0.attn.wv.weight"}) {
      EXPECT_EQ(find_buffer(g, w)->shape, (std::vector<int64_t>{c.kv_heads * d, c.h}));
    }
    EXPECT_EQ(find_buffer(g, "layers.0.attn.wk")->shape,
              (std::vector<int64_t>{1, s, c.kv_heads * d}));
    const Buffer* k_repeat = find_buffer(g, "layers.0.attn.k_repeat");
    if (c.kv_heads == c.heads) {
      EXPECT_EQ(k_repeat, nullptr);  // repeat_kv returns its input when n_rep == 1
      continue;
    }
    // Plain path: HF's repeat_kv copies are what the matmuls read and save.
    ASSERT_NE(k_repeat, nullptr);
    EXPECT_EQ(k_repeat->shape, (std::vector<int64_t>{1, c.heads, s, d}));
    EXPECT_EQ(reads(g, *find_op(g, "layers.0.attn.scores")),
              (std::vector<std::string>{"layers.0.attn.k_repeat", "layers.0.attn.rotary_q"}));
    EXPECT_EQ(g.buffers[find_op(g, "layers.0.attn.context")->in[1]].name, "layers.0.attn.v_repeat");
    // Their backward is a sum over the query groups, reading only the gradient.
    EXPECT_EQ(find_op(g, "layers.0.attn.k_repeat.bwd")->in.size(), 1u);
    // Flash reads the 8 KV heads directly: no copies.
    Graph f = build_transformer(c.model, 1, s, Precision::kBf16, Optimizer::kAdam, true);
    EXPECT_EQ(find_buffer(f, "layers.0.attn.k_repeat"), nullptr);
    EXPECT_EQ(reads(f, *find_op(f, "layers.0.attn.flash")),
              (std::vector<std::string>{"layers.0.attn.rotary_k", "layers.0.attn.rotary_q",
                                        "layers.0.attn.wv"}));
  }
}

// ---- Mixture of experts ------------------------------------------------------------

TEST(TransformerMoe, BalancedRoutingGivesEachExpertCeilNkOverE) {
  // Mixtral: 8 experts, top-2. Balanced routing: ceil(N * 2 / 8) tokens each.
  for (const auto& [b, s, per_expert] : {std::tuple<int64_t, int64_t, int64_t>{1, 128, 32},
                                         std::tuple<int64_t, int64_t, int64_t>{1, 100, 25},
                                         std::tuple<int64_t, int64_t, int64_t>{3, 7, 6}}) {
    SCOPED_TRACE(fmt::format("b={} s={}", b, s));
    Graph g = build_transformer("mixtral-8x7b", b, s);
    int gathers = 0;
    for (const Op& op : g.ops) {
      if (op.type != "index_select" || op.phase != Phase::kForward) continue;
      ++gathers;
      EXPECT_EQ(g.buffers[op.out.at(0)].shape, (std::vector<int64_t>{per_expert, 4096}));
    }
    EXPECT_EQ(gathers, 32 * 8);
    const Buffer* idx = find_buffer(g, "layers.7.moe.expert_indices");
    ASSERT_NE(idx, nullptr);
    EXPECT_EQ(idx->dtype, DType::kI64);
    EXPECT_EQ(idx->shape, (std::vector<int64_t>{b * s, 2}));
    EXPECT_EQ(find_buffer(g, "layers.7.moe.router_probs")->dtype, DType::kF32);
    EXPECT_EQ(find_buffer(g, "layers.7.moe.experts.3.w1")->shape,
              (std::vector<int64_t>{per_expert, 14336}));
  }
}

TEST(TransformerMoe, ScatterAddIntoTheOutputInPlace) {
  Graph g = build_transformer("mixtral-8x7b", 1, 128);
  const Buffer* out = find_buffer(g, "layers.0.moe.output");
  ASSERT_NE(out, nullptr);
  // Each of the 8 experts' index_add_ reads the current version of the
  // output and creates the next one in its place (Note [Buffer versions]):
  // output, output@v1, ..., output@v8.
  BufferId version = out->id;
  int updates = 0;
  for (const Op& op : g.ops) {
    if (std::find(op.in.begin(), op.in.end(), version) == op.in.end() || op.type != "index_add") {
      continue;
    }
    ASSERT_EQ(op.out.size(), 1u);
    const Buffer& next = g.buffers[op.out[0]];
    EXPECT_EQ(next.version_of, version);
    EXPECT_EQ(next.bytes, out->bytes);
    EXPECT_EQ(next.name, fmt::format("layers.0.moe.output@v{}", ++updates));
    version = next.id;
  }
  EXPECT_EQ(updates, 8);
  // Nothing updates it in place any more, and storage sharing keeps the
  // default schedule's peak that of the in-place program: the out-of-place
  // rewrite holds at least as much.
  for (const Op& op : g.ops) {
    EXPECT_EQ(std::find(op.updates.begin(), op.updates.end(), out->id), op.updates.end());
  }
  EXPECT_LE(memory_profile(g).peak_bytes, memory_profile(out_of_place(g)).peak_bytes);
}

}  // namespace
}  // namespace memwall
