// GPT-2 (Radford et al. 2019) as Hugging Face's GPT2LMHeadModel: learned
// token and position embeddings, pre-LN blocks with a fused QKV projection
// (c_attn, with bias), GELU MLP of width 4h, dropout 0.1 on the embeddings,
// the attention probabilities and both residual branches, final LayerNorm and
// an LM head tied to the token embeddings.
//
// Simplification: the loss covers all b*s positions. HF shifts logits and
// labels by one (s-1 positions, plus a contiguous copy of the shifted
// logits); the difference is one position per sequence.
#include <string>

#include "architectures.h"
#include "attention.h"
#include "context_parallel.h"
#include "layers.h"
#include "memwall/base/error.h"
#include "tensor_parallel.h"

namespace memwall::models {
namespace {

struct Gpt2Config {
  const char* name;
  int64_t layers, hidden, heads;
};

// HF config.json of gpt2, gpt2-medium, gpt2-large, gpt2-xl.
constexpr Gpt2Config kGpt2Configs[] = {
    {"gpt2-small", 12, 768, 12},
    {"gpt2-medium", 24, 1024, 16},
    {"gpt2-large", 36, 1280, 20},
    {"gpt2-xl", 48, 1600, 25},
};
constexpr int64_t kGpt2Vocab = 50257;
constexpr int64_t kGpt2Positions = 1024;
constexpr double kGpt2Dropout = 0.1;  // embd_pdrop, attn_pdrop, resid_pdrop

}  // namespace

ModelShape gpt2_shape(std::string_view variant, const ModelOptions& opts) {
  const Gpt2Config* found = nullptr;
  for (const Gpt2Config& c : kGpt2Configs) {
    if (variant == c.name) found = &c;
  }
  if (found == nullptr) fail("model: unknown GPT-2 variant '{}'", variant);
  // The variant's shape, or the one the options give (checked by build_model).
  const ModelShape& given = opts.shape;
  const auto either = [](int64_t value, int64_t own) { return value > 0 ? value : own; };
  ModelShape shape;
  shape.layers = either(given.layers, found->layers);
  shape.hidden = either(given.hidden, found->hidden);
  shape.heads = either(given.heads, found->heads);
  shape.kv_heads = shape.heads;
  shape.ffn = 4 * shape.hidden;
  shape.vocab = either(given.vocab, kGpt2Vocab);
  shape.positions = either(given.positions, kGpt2Positions);
  return shape;
}

Graph build_gpt2(std::string_view variant, const ModelOptions& opts) {
  const ModelShape shape = gpt2_shape(variant, opts);
  const Gpt2Config shaped{"", shape.layers, shape.hidden, shape.heads};
  const Gpt2Config* cfg = &shaped;
  const int64_t vocab_size = shape.vocab, max_positions = shape.positions;
  if (opts.seq > max_positions) fail("model {}: sequence longer than {}", variant, max_positions);
  const int64_t batch = opts.batch, h = cfg->hidden;

  Builder b(std::string(variant), opts);
  // Note [Context parallelism in the zoo]: the rank's positions.
  const int64_t s = cp_local_seq(b, opts.seq);
  // Note [Tensor parallelism in the zoo]: one rank's share of the heads,
  // the vocabulary (padded as Megatron pads it) and, with sequence
  // parallelism, of the positions between the matmuls.
  const int64_t t = tp_ranks(b);
  check_tp_split(b, cfg->heads, "attention heads");
  const int64_t heads = cfg->heads / t, s_local = tp_local_seq(b, s);
  Tensor ids = b.input("input_ids", {batch, s}, DType::kI64);
  Tensor positions = b.input("position_ids", {s_local}, DType::kI64);
  Tensor labels = b.input("labels", {batch, s}, DType::kI64);
  const int64_t vocab = tp_padded_vocab(b, vocab_size);
  Tensor wte = b.param("wte.weight", {vocab / t, h});
  Tensor wpe = b.param("wpe.weight", {max_positions, h});

  Tensor x = vocab_parallel_embedding(b, "wte", ids, wte);
  x = add_broadcast(b, "embed_sum", x, embedding(b, "wpe", positions, wpe));
  x = dropout(b, "embed_dropout", x, kGpt2Dropout);

  // Every buffer a block creates carries its "h<i>." prefix; its residual
  // output is what the next block's ln_1 saves (Korthikanti et al. 2022,
  // sec. 4.1, count it as that layer's LayerNorm input).
  for (int64_t i = 0; i < cfg->layers; ++i) {
    auto block = b.scope(fmt::format("h{}", i));
    Tensor a = layer_norm(b, "ln_1", x);
    Tensor qkv = column_parallel_linear(b, "attn.qkv", a, 3 * h, true);
    QkvViews views = split_qkv(qkv, heads);
    a = attention(b, "attn", views.q, views.k, views.v,
                  {.heads = heads,
                   .kv_heads = heads,
                   .causal = true,
                   .dropout = kGpt2Dropout,
                   .flash = opts.flash});
    a = row_parallel_linear(b, "attn.proj", a, h, true);
    a = dropout(b, "attn.resid_dropout", a, kGpt2Dropout);
    x = add(b, "attn_residual", x, a);

    Tensor m = layer_norm(b, "ln_2", x);
    m = column_parallel_linear(b, "mlp.fc", m, 4 * h, true);
    m = gelu_tanh(b, "mlp.gelu", m);
    m = row_parallel_linear(b, "mlp.proj", m, h, true);
    m = dropout(b, "mlp.dropout", m, kGpt2Dropout);
    x = add(b, "mlp_residual", x, m);
  }
  x = layer_norm(b, "ln_f", x);
  // Tied: no weight of its own.
  Tensor logits = vocab_parallel_logits(b, "lm_head", x, wte);
  Tensor loss = vocab_parallel_cross_entropy(b, "loss", b.view(logits, {batch * s, vocab / t}),
                                             b.view(labels, {batch * s}));
  return b.finish(loss);
}

}  // namespace memwall::models
