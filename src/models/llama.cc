// Llama 2 (Touvron et al. 2023) and Llama 3 8B as Hugging Face's
// LlamaForCausalLM: token embeddings, pre-norm blocks with RMSNorm, rotary
// position embedding, grouped-query attention (Llama-2-70B, Llama-3-8B: 8 KV
// heads), SwiGLU MLP, no biases, no dropout, final RMSNorm and an untied
// output projection. Names follow Meta's reference code (wq/wk/wv/wo,
// w1/w3/w2); docs/zoo-transformers.md maps them to HF's.
//
// Simplification: the loss covers all b*s positions (HF shifts by one).
#include <string>

#include "architectures.h"
#include "attention.h"
#include "context_parallel.h"
#include "layers.h"
#include "memwall/base/error.h"
#include "tensor_parallel.h"

namespace memwall::models {
namespace {

struct LlamaConfig {
  const char* name;
  int64_t layers, hidden, heads, kv_heads, ffn, vocab;
};

// HF config.json of meta-llama/Llama-2-{7b,13b,70b}-hf and Meta-Llama-3-8B.
constexpr LlamaConfig kLlamaConfigs[] = {
    {"llama2-7b", 32, 4096, 32, 32, 11008, 32000},
    {"llama2-13b", 40, 5120, 40, 40, 13824, 32000},
    {"llama2-70b", 80, 8192, 64, 8, 28672, 32000},
    {"llama3-8b", 32, 4096, 32, 8, 14336, 128256},
};

}  // namespace

ModelShape llama_shape(std::string_view variant, const ModelOptions& opts) {
  const LlamaConfig* found = nullptr;
  for (const LlamaConfig& c : kLlamaConfigs) {
    if (variant == c.name) found = &c;
  }
  if (found == nullptr) fail("model: unknown Llama variant '{}'", variant);
  // The variant's shape, or the one the options give (checked by build_model;
  // the context is the sequence's bound, which build_model checks too).
  const ModelShape& given = opts.shape;
  const auto either = [](int64_t value, int64_t own) { return value > 0 ? value : own; };
  ModelShape shape;
  shape.layers = either(given.layers, found->layers);
  shape.hidden = either(given.hidden, found->hidden);
  shape.heads = either(given.heads, found->heads);
  shape.kv_heads = either(given.kv_heads, given.heads > 0 ? shape.heads : found->kv_heads);
  shape.ffn = either(given.ffn, found->ffn);
  shape.vocab = either(given.vocab, found->vocab);
  shape.positions = given.positions;  // 0: the release's context (zoo.cc)
  return shape;
}

Graph build_llama(std::string_view variant, const ModelOptions& opts) {
  const ModelShape shape = llama_shape(variant, opts);
  const LlamaConfig shaped{"",          shape.layers, shape.hidden, shape.heads,
                           shape.kv_heads, shape.ffn,   shape.vocab};
  const LlamaConfig* cfg = &shaped;
  const int64_t batch = opts.batch, h = cfg->hidden;

  Builder b(std::string(variant), opts);
  // Note [Context parallelism in the zoo]: the rank's positions.
  const int64_t s = cp_local_seq(b, opts.seq);
  // Note [Tensor parallelism in the zoo]: one rank's share of the
  // vocabulary (padded as Megatron-LM pads it), heads and MLP; with
  // sequence parallelism, of the positions between the matmuls.
  const int64_t t = tp_ranks(b), vocab = tp_padded_vocab(b, cfg->vocab);
  tp_local_seq(b, s);
  Tensor ids = b.input("input_ids", {batch, s}, DType::kI64);
  Tensor labels = b.input("labels", {batch, s}, DType::kI64);
  const RotaryTables rope = rotary_tables(b, s, h / cfg->heads);
  Tensor x = vocab_parallel_embedding(b, "tok_embeddings", ids,
                                      b.param("tok_embeddings.weight", {vocab / t, h}));

  for (int64_t i = 0; i < cfg->layers; ++i) {
    auto block = b.scope(fmt::format("layers.{}", i));
    Tensor a = rms_norm(b, "attention_norm", x);
    a = llama_attention(b, "attn", a, rope, cfg->heads, cfg->kv_heads, opts.flash);
    x = add(b, "attn_residual", x, a);
    Tensor m = rms_norm(b, "ffn_norm", x);
    m = swiglu_mlp(b, "mlp", m, cfg->ffn);
    x = add(b, "mlp_residual", x, m);
  }
  x = rms_norm(b, "norm", x);
  if (t > 1) {
    Tensor logits = vocab_parallel_logits(b, "output", x, b.param("output.weight", {vocab / t, h}));
    return b.finish(vocab_parallel_cross_entropy(
        b, "loss", b.view(logits, {batch * s, vocab / t}), b.view(labels, {batch * s})));
  }
  Tensor logits = linear_layer(b, "output", x, cfg->vocab, false, LinearRole::kHead);
  Tensor loss = cross_entropy(b, "loss", b.view(logits, {batch * s, cfg->vocab}),
                              b.view(labels, {batch * s}));
  return b.finish(loss);
}

}  // namespace memwall::models
