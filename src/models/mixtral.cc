// Mixtral 8x7B (Jiang et al. 2024) as Hugging Face's MixtralForCausalLM: the
// Llama/Mistral block (RMSNorm, rotary, 32 heads with 8 KV heads) with the
// MLP replaced by a sparse mixture of 8 SwiGLU experts, top-2 routing
// (attention.h, moe()), untied output projection, no dropout.
//
// Simplifications: balanced routing (every expert gets ceil(b*s*2/8) tokens;
// the real split depends on the router); no router auxiliary loss (HF adds it
// only with output_router_logits=True); no sliding window (Mixtral's config
// has none); the loss covers all b*s positions.
//
// Parallel: tensor parallelism as Llama's (Note [Tensor parallelism in the
// zoo]), the router whole on every rank and each expert's width split
// (Megatron-Core's expert tensor parallelism equal to t), the block's input
// made whole and its output summed once around the whole mixture
// (tp_region_input / tp_region_output); expert parallelism (Note [Expert
// parallelism in the zoo]) over ModelOptions::expert_parallel ranks.
#include <string>

#include "architectures.h"
#include "attention.h"
#include "layers.h"
#include "tensor_parallel.h"
#include "memwall/base/error.h"

namespace memwall::models {
namespace {

// HF config.json of mistralai/Mixtral-8x7B-v0.1.
constexpr int64_t kLayers = 32, kHidden = 4096, kHeads = 32, kKvHeads = 8;
constexpr int64_t kExperts = 8, kTopK = 2, kFfn = 14336, kMixtralVocab = 32000;

}  // namespace

Graph build_mixtral(std::string_view variant, const ModelOptions& opts) {
  if (variant != "mixtral-8x7b") fail("model: unknown Mixtral variant '{}'", variant);
  const int64_t batch = opts.batch, s = opts.seq, h = kHidden;

  Builder b(std::string(variant), opts);
  const int64_t t = tp_ranks(b), vocab = tp_padded_vocab(b, kMixtralVocab);
  const int64_t s_local = tp_local_seq(b, s);
  Tensor ids = b.input("input_ids", {batch, s}, DType::kI64);
  Tensor labels = b.input("labels", {batch, s}, DType::kI64);
  const RotaryTables rope = rotary_tables(b, s, h / kHeads);
  Tensor x = vocab_parallel_embedding(b, "tok_embeddings", ids,
                                      b.param("tok_embeddings.weight", {vocab / t, h}));

  for (int64_t i = 0; i < kLayers; ++i) {
    auto block = b.scope(fmt::format("layers.{}", i));
    Tensor a = rms_norm(b, "attention_norm", x);
    a = llama_attention(b, "attn", a, rope, kHeads, kKvHeads, opts.flash);
    x = add(b, "attn_residual", x, a);
    Tensor m = tp_region_input(b, "moe", rms_norm(b, "ffn_norm", x));
    // MixtralSparseMoeBlock works on hidden_states.view(-1, h).
    m = moe(b, "moe", b.view(m, {batch * s, h}),
            {.experts = kExperts, .top_k = kTopK, .ffn = kFfn});
    m = tp_region_output(b, "moe", b.view(m, {batch, s, h}));
    x = add(b, "moe_residual", x, b.view(m, {batch, s_local, h}));
  }
  x = rms_norm(b, "norm", x);
  if (t > 1) {
    Tensor logits = vocab_parallel_logits(b, "output", x, b.param("output.weight", {vocab / t, h}));
    return b.finish(vocab_parallel_cross_entropy(
        b, "loss", b.view(logits, {batch * s, vocab / t}), b.view(labels, {batch * s})));
  }
  Tensor logits = linear_layer(b, "output", x, kMixtralVocab, false, LinearRole::kHead);
  Tensor loss = cross_entropy(b, "loss", b.view(logits, {batch * s, kMixtralVocab}),
                              b.view(labels, {batch * s}));
  return b.finish(loss);
}

}  // namespace memwall::models
