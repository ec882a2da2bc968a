// Transformer-specific layer functions: attention (plain and flash), rotary
// embedding, SwiGLU MLP, top-k mixture of experts, broadcast position
// embeddings. Like layers.h, each emits its forward ops and pushes backward
// closures that read exactly what the real backward kernels read
// (builder.h, Note [Tape]). docs/zoo-transformers.md lists every op.
//
// Saved tensors:
//   plain attention  Q, K (for dK, dQ), softmax output P, dropout mask, dropout
//                    output P_d and V (for dV, dP_d). The scores QK^T are
//                    transient: softmax backward needs only its output.
//   flash attention  Q, K, V, the output O and the fp32 logsumexp [b, a, s]
//                    (FlashAttention-2, Dao 2023); dropout keeps only the RNG
//                    state (16 bytes, not modelled).
//   rotary           nothing: its backward reads the gradient and cos/sin.
//   repeat_kv        nothing: its backward is a sum over the query groups.
#pragma once

#include <cstdint>
#include <string_view>

#include "builder.h"

namespace memwall::models {

struct AttentionOptions {
  int64_t heads = 0;     // query heads a
  int64_t kv_heads = 0;  // key/value heads (< heads: grouped-query attention)
  bool causal = false;
  double dropout = 0;  // on the attention probabilities (training)
  bool flash = false;  // one fused FlashAttention-2 kernel
};

// Scaled dot-product attention of q [b, heads, s, d] over k, v
// [b, kv_heads, s, d]; returns the context [b, s, heads * d] (the head merge
// is folded into the output layout of the last kernel).
//
// q, k and v are either three distinct buffers or three views of one fused
// QKV buffer (GPT-2's c_attn). In the fused case the builder tracks one
// gradient per buffer, so backward emits dQ, dK, dV as temporaries and then a
// "cat" op creating the fused gradient, as PyTorch's SplitBackward does.
//
// Plain grouped-query attention materializes the expanded K and V first, as
// Hugging Face's repeat_kv does; the matmuls save those copies. The flash
// kernel reads the kv_heads tensors directly.
Tensor attention(Builder& b, std::string_view name, const Tensor& q, const Tensor& k,
                 const Tensor& v, const AttentionOptions& opts);

// Views of a fused [b, s, 3 * heads * d] QKV buffer as q, k, v
// [b, heads, s, d] (split + view + transpose in PyTorch: no copies).
struct QkvViews {
  Tensor q, k, v;
};
QkvViews split_qkv(const Tensor& qkv, int64_t heads);

// Rotary position embedding (Su et al. 2021) of x [b, s, heads, d] with
// tables cos, sin [s, d] (model inputs); returns [b, heads, s, d]. One fused
// kernel: y = x * cos + rotate_half(x) * sin; backward reads only the
// gradient and the tables.
Tensor rotary(Builder& b, std::string_view name, const Tensor& x, const Tensor& cos,
              const Tensor& sin);

// Rotary tables cos, sin [seq, head_dim] in compute dtype, model inputs
// (Hugging Face recomputes them each forward from the position ids; they
// need no gradient). Shared by every layer.
struct RotaryTables {
  Tensor cos, sin;
};
RotaryTables rotary_tables(Builder& b, int64_t seq, int64_t head_dim);

// The Llama-family attention sublayer on x [b, s, h]: "<name>.wq", "wk", "wv"
// (no biases), rotary on q and k, causal attention without dropout, "wo".
// kv_heads < heads gives grouped-query attention.
Tensor llama_attention(Builder& b, std::string_view name, const Tensor& x, const RotaryTables& rope,
                       int64_t heads, int64_t kv_heads, bool flash);

// SwiGLU MLP (Shazeer 2020) as in Llama / Mixtral: w2(silu(w1 x) * w3 x), no
// biases. Creates "<name>.w1" (gate), "<name>.w3" (up), "<name>.w2" (down).
Tensor swiglu_mlp(Builder& b, std::string_view name, const Tensor& x, int64_t ffn);

struct MoeOptions {
  int64_t experts = 0;
  int64_t top_k = 0;
  int64_t ffn = 0;  // SwiGLU intermediate size of each expert
};

// Tokens each expert receives under balanced routing: ceil(tokens * top_k /
// experts). The real count depends on the router's decisions, which a static
// graph cannot know; balanced routing is the load-balancing loss's target.
int64_t moe_tokens_per_expert(int64_t tokens, const MoeOptions& opts);

// Sparse mixture-of-experts block as in Hugging Face's MixtralSparseMoeBlock
// on x [N, h]: router linear "<name>.gate" [experts, h], fp32 softmax, top-k
// with renormalized weights and int64 expert indices; per expert: gather its
// tokens, SwiGLU expert "<name>.experts.<e>", scale by the routing weight,
// scatter-add (index_add_) into the output. Returns [N, h].
Tensor moe(Builder& b, std::string_view name, const Tensor& x, const MoeOptions& opts);

// x [b, s, h] + table rows [s, h] broadcast over the batch (learned position
// embeddings). The table's gradient is the batch sum of the output gradient
// (autograd's sum_to_size; no reduction when b == 1).
Tensor add_broadcast(Builder& b, std::string_view name, const Tensor& x, const Tensor& rows);

}  // namespace memwall::models
