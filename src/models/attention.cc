#include "attention.h"

#include <array>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attention_parts.h"
#include "context_parallel.h"
#include "expert_parallel.h"
#include "layers.h"
#include "tensor_parallel.h"
#include "memwall/base/error.h"

namespace memwall::models {
namespace {

using attention_parts::dbl;
using attention_parts::distinct;
using attention_parts::QkvGradients;
using attention_parts::traffic;


// Hugging Face's repeat_kv: expand + reshape materializes [b, heads, s, d]
// from [b, kv_heads, s, d]. Its backward sums the gradient over the query
// groups and reads nothing else.
Tensor repeat_kv(Builder& b, const std::string& name, const Tensor& x, int64_t heads,
                 std::shared_ptr<QkvGradients> sink, int which) {
  const std::string fq = b.qualified(name);
  std::vector<int64_t> shape = x.shape;
  shape[1] = heads;
  Tensor y = b.emit1({.name = name, .type = "repeat_kv", .in = {x}}, {name, shape, x.dtype, kAct});
  b.propagate_requires_grad({x}, {y});
  b.on_backward([&b, fq, x, y, sink, which] {
    Tensor g = b.grad(y);
    if (!g.valid() || !b.requires_grad(x)) return;
    Tensor dx = b.emit1({.name = fq + ".bwd",
                         .type = "repeat_kv_backward",
                         .phase = Phase::kBackward,
                         .in = {g},
                         .flops = numel_d(g)},
                        {fq + ".grad", x.shape, g.dtype, kTmp});
    sink->deliver(b, which, dx);
  });
  return y;
}

void check_attention_shapes(Builder& b, std::string_view name, const Tensor& q, const Tensor& k,
                            const Tensor& v, const AttentionOptions& o) {
  const auto bad = [&](const char* why) {
    fail("model: attention {}: {}", b.qualified(name), why);
  };
  if (q.shape.size() != 4 || k.shape.size() != 4 || v.shape.size() != 4) {
    bad("q, k, v must be [batch, heads, seq, head_dim]");
  }
  if (o.heads <= 0 || o.kv_heads <= 0 || o.heads % o.kv_heads != 0) {
    bad("heads must be a positive multiple of kv_heads");
  }
  if (q.shape[1] != o.heads) bad("q has the wrong number of heads");
  for (const Tensor* t : {&k, &v}) {
    if (t->shape != std::vector<int64_t>{q.shape[0], o.kv_heads, q.shape[2], q.shape[3]}) {
      bad("k and v must be [batch, kv_heads, seq, head_dim] matching q");
    }
  }
  const bool fused = q.id == k.id && k.id == v.id;
  if (!fused && (q.id == k.id || q.id == v.id || k.id == v.id)) {
    bad("q, k, v must be three buffers or three views of one fused buffer");
  }
}

Tensor plain_attention(Builder& b, const std::string& fq, const Tensor& q, const Tensor& k,
                       const Tensor& v, const AttentionOptions& o,
                       const std::shared_ptr<QkvGradients>& sink) {
  const int64_t batch = q.shape[0], heads = o.heads, s = q.shape[2], d = q.shape[3];
  const DType dt = q.dtype;
  const std::vector<int64_t> ss_shape = {batch, heads, s, s};
  const double mm_flops = 2.0 * dbl(batch) * dbl(heads) * dbl(s) * dbl(s) * dbl(d);

  // Grouped-query attention: the expanded copies are what the matmuls read
  // and save. They are delivered to as ordinary buffers. With one key-value
  // head (a rank's share under tensor parallelism, Llama-2-70B at t = 8)
  // repeat_kv's expand + reshape merges a size-1 dimension and is a view:
  // the matmuls read and save k and v themselves, and the gradient of the
  // view is summed over the heads (ExpandBackward). Measured in
  // docs/torch-layout.md.
  const bool gqa = o.kv_heads != o.heads;
  const bool view = gqa && o.kv_heads == 1;
  const auto expand = [&](const Tensor& t) {
    std::vector<int64_t> shape = t.shape;
    shape[1] = heads;
    return Tensor{t.id, shape, t.dtype};
  };
  Tensor kk = view ? expand(k) : gqa ? repeat_kv(b, "k_repeat", k, heads, sink, 1) : k;
  Tensor vv = view ? expand(v) : gqa ? repeat_kv(b, "v_repeat", v, heads, sink, 2) : v;
  const auto deliver = [&b, fq, sink, gqa, view](const Tensor& expanded, const Tensor& kv,
                                                 const char* name, int which,
                                                 const Tensor& g) {
    if (view) {
      Tensor summed = b.emit1({.name = fq + "." + name + ".bwd",
                               .type = "repeat_kv_backward",
                               .phase = Phase::kBackward,
                               .in = {g},
                               .flops = numel_d(g)},
                              {fq + "." + name + ".grad", kv.shape, g.dtype, kTmp});
      sink->deliver(b, which, summed);
    } else if (gqa) {
      b.add_grad(expanded, g, b.graph().buffers[expanded.id].name);
    } else {
      sink->deliver(b, which, g);
    }
  };
  const auto deliver_k = [deliver, kk, k](const Tensor& g) { deliver(kk, k, "k_repeat", 1, g); };
  const auto deliver_v = [deliver, vv, v](const Tensor& g) { deliver(vv, v, "v_repeat", 2, g); };

  // scores = Q K^T: transient, softmax's backward needs only its output.
  Tensor scores = b.emit1({.name = "scores",
                           .type = "matmul",
                           .in = distinct({q, kk}),
                           .flops = mm_flops,
                           .bytes = traffic({q, kk}) + dbl(checked_numel(ss_shape)) *
                                                           static_cast<double>(dtype_size(dt))},
                          {"scores", ss_shape, dt, kAct});
  b.propagate_requires_grad({q, kk}, {scores});
  // Softmax with the 1/sqrt(d) scale and the causal mask fused in.
  Tensor probs =
      b.emit1({.name = "softmax", .type = "softmax", .in = {scores}, .flops = 5 * numel_d(scores)},
              {"probs", ss_shape, dt, kAct});
  b.propagate_requires_grad({scores}, {probs});
  b.on_backward([&b, fq, q, kk, probs, mm_flops, deliver_k, sink] {
    Tensor gp = b.grad(probs);
    if (!gp.valid()) return;
    // dS = P * (dP - rowsum(dP * P)), scaled: reads P and dP.
    Tensor ds = b.emit1({.name = fq + ".softmax.bwd",
                         .type = "softmax_backward",
                         .phase = Phase::kBackward,
                         .in = {gp, probs},
                         .flops = 4 * numel_d(probs)},
                        {fq + ".grad_scores", probs.shape, gp.dtype, kTmp});
    // BmmBackward: dQ = dS K, then dK = dS^T Q.
    if (b.requires_grad(q)) {
      Tensor dq = b.emit1({.name = fq + ".scores.bwd_q",
                           .type = "matmul",
                           .phase = Phase::kBackward,
                           .in = {ds, kk},
                           .flops = mm_flops,
                           .bytes = traffic({ds, kk, q})},
                          {fq + ".grad_q", q.shape, gp.dtype, kTmp});
      sink->deliver(b, 0, dq);
    }
    if (b.requires_grad(kk)) {
      Tensor dk = b.emit1({.name = fq + ".scores.bwd_k",
                           .type = "matmul",
                           .phase = Phase::kBackward,
                           .in = {ds, q},
                           .flops = mm_flops,
                           .bytes = traffic({ds, q, kk})},
                          {fq + ".grad_k", kk.shape, gp.dtype, kTmp});
      deliver_k(dk);
    }
  });

  Tensor dropped = dropout(b, "probs_dropout", probs, o.dropout);

  // ctx = P_d V, written straight in [b, s, heads * d] layout.
  Tensor ctx = b.emit1({.name = "context",
                        .type = "matmul",
                        .in = distinct({dropped, vv}),
                        .flops = mm_flops,
                        .bytes = traffic({dropped, vv}) +
                                 dbl(batch * s * heads * d) * static_cast<double>(dtype_size(dt))},
                       {"context", {batch, s, heads * d}, dt, kAct});
  b.propagate_requires_grad({dropped, vv}, {ctx});
  b.on_backward([&b, fq, dropped, vv, ctx, mm_flops, deliver_v] {
    Tensor g = b.grad(ctx);
    if (!g.valid()) return;
    // dP_d = G V^T, then dV = P_d^T G.
    if (b.requires_grad(dropped)) {
      Tensor dp = b.emit1({.name = fq + ".context.bwd_probs",
                           .type = "matmul",
                           .phase = Phase::kBackward,
                           .in = distinct({g, vv}),
                           .flops = mm_flops,
                           .bytes = traffic({g, vv, dropped})},
                          {fq + ".grad_probs", dropped.shape, g.dtype, kTmp});
      b.add_grad(dropped, dp, fq + ".context");
    }
    if (b.requires_grad(vv)) {
      Tensor dv = b.emit1({.name = fq + ".context.bwd_v",
                           .type = "matmul",
                           .phase = Phase::kBackward,
                           .in = {dropped, g},
                           .flops = mm_flops,
                           .bytes = traffic({dropped, g, vv})},
                          {fq + ".grad_v", vv.shape, g.dtype, kTmp});
      deliver_v(dv);
    }
  });
  return ctx;
}

Tensor flash_attention(Builder& b, const std::string& fq, const Tensor& q, const Tensor& k,
                       const Tensor& v, const AttentionOptions& o,
                       const std::shared_ptr<QkvGradients>& sink) {
  const int64_t batch = q.shape[0], heads = o.heads, s = q.shape[2], d = q.shape[3];
  const DType dt = q.dtype;
  // Two s x s matmuls that never reach memory; a causal kernel skips the
  // blocks above the diagonal, half the work (FlashAttention-2, sec. 4.1).
  double fwd_flops = 4.0 * dbl(batch) * dbl(heads) * dbl(s) * dbl(s) * dbl(d);
  if (o.causal) fwd_flops /= 2;
  std::vector<Tensor> outs = b.emit(
      {.name = "flash", .type = "flash_attention", .in = distinct({q, k, v}), .flops = fwd_flops},
      {{"context", {batch, s, heads * d}, dt, kAct},
       {"lse", {batch, heads, s}, DType::kF32, kAct}});
  Tensor out = outs[0];
  Tensor lse = outs[1];
  b.propagate_requires_grad({q, k, v}, {out});
  const uint64_t workspace =
      attention_parts::flash_backward_workspace(batch, s, heads, d, o.kv_heads, dt);
  b.on_backward([&b, fq, q, k, v, out, lse, fwd_flops, workspace, sink] {
    Tensor g = b.grad(out);
    if (!g.valid()) return;
    std::vector<Builder::OutSpec> grads = {{fq + ".grad_q", q.shape, g.dtype, kTmp},
                                           {fq + ".grad_k", k.shape, g.dtype, kTmp},
                                           {fq + ".grad_v", v.shape, g.dtype, kTmp}};
    // Five matmuls per block against the forward's two: 2.5x (Dao 2023).
    std::vector<Tensor> dqkv =
        b.emit({.name = fq + ".flash.bwd",
                .type = "flash_attention_backward",
                .phase = Phase::kBackward,
                .in = distinct({g, q, k, v, out, lse}),
                .workspace = workspace,
                .flops = 2.5 * fwd_flops,
                .bytes = traffic({g, q, k, v, out, lse}) + traffic({q, k, v})},
               grads);
    for (int i = 0; i < 3; ++i) {
      if (b.requires_grad(i == 0 ? q : i == 1 ? k : v)) sink->deliver(b, i, dqkv[i]);
    }
  });
  return out;
}

}  // namespace

Tensor attention(Builder& b, std::string_view name, const Tensor& q, const Tensor& k,
                 const Tensor& v, const AttentionOptions& opts) {
  if (name.empty()) fail("model: attention needs a name (its scope)");
  check_attention_shapes(b, name, q, k, v, opts);
  const std::string fq = b.qualified(name);
  auto sink = std::make_shared<QkvGradients>();
  sink->fused = q.id == k.id && k.id == v.id;
  sink->inputs = {q, k, v};
  sink->name = fq;
  if (sink->fused) {
    // Pushed first, so it runs after every closure below has delivered dQ,
    // dK and dV: SplitBackward concatenates them into the fused gradient.
    const Buffer& base_buf = b.graph().buffers[q.id];
    Tensor base{q.id, base_buf.shape.to_vector(), base_buf.dtype};
    b.on_backward([&b, fq, base, sink] {
      const auto& g = sink->grads;
      if (!g[0].valid() || !g[1].valid() || !g[2].valid()) return;
      Tensor dqkv = b.emit1({.name = fq + ".qkv_grad_cat",
                             .type = "cat",
                             .phase = Phase::kBackward,
                             .in = distinct({g[0], g[1], g[2]})},
                            {fq + ".grad_qkv", base.shape, g[0].dtype, kTmp});
      b.add_grad(base, dqkv, fq + ".qkv");
    });
  }
  auto scope = b.scope(name);
  if (cp_ranks(b) > 1) {
    // Note [Context parallelism in the zoo]: blockwise flash kernels only.
    if (!opts.flash) {
      fail("model {}: context parallelism runs blockwise flash attention: give --flash",
           b.graph().name);
    }
    return ring_flash_attention(b, fq, q, k, v, opts, sink);
  }
  if (opts.flash) return flash_attention(b, fq, q, k, v, opts, sink);
  return plain_attention(b, fq, q, k, v, opts, sink);
}

QkvViews split_qkv(const Tensor& qkv, int64_t heads) {
  if (qkv.shape.size() != 3 || heads <= 0 || qkv.shape[2] % (3 * heads) != 0) {
    fail("model: fused QKV tensor must be [batch, seq, 3 * heads * head_dim]");
  }
  const int64_t d = qkv.shape[2] / (3 * heads);
  const std::vector<int64_t> shape = {qkv.shape[0], heads, qkv.shape[1], d};
  // Views of one buffer: same id, each a third of its elements.
  return {Tensor{qkv.id, shape, qkv.dtype}, Tensor{qkv.id, shape, qkv.dtype},
          Tensor{qkv.id, shape, qkv.dtype}};
}

Tensor rotary(Builder& b, std::string_view name, const Tensor& x, const Tensor& cos,
              const Tensor& sin) {
  if (x.shape.size() != 4 || cos.shape != std::vector<int64_t>{x.shape[1], x.shape[3]} ||
      sin.shape != cos.shape) {
    fail("model: rotary {} expects x [b, s, heads, d] and tables [s, d]", b.qualified(name));
  }
  const std::string n(name);
  const std::string fq = b.qualified(name);
  // x * cos + rotate_half(x) * sin: ~3 flops per element.
  Tensor y = b.emit1({.name = n, .type = "rotary", .in = {x, cos, sin}, .flops = 3 * numel_d(x)},
                     {n, {x.shape[0], x.shape[2], x.shape[1], x.shape[3]}, x.dtype, kAct});
  b.propagate_requires_grad({x}, {y});
  b.on_backward([&b, fq, x, y, cos, sin] {
    Tensor g = b.grad(y);
    if (!g.valid() || !b.requires_grad(x)) return;
    // The transpose rotation: dx = g * cos - rotate_half(g * sin).
    Tensor dx = b.emit1({.name = fq + ".bwd",
                         .type = "rotary_backward",
                         .phase = Phase::kBackward,
                         .in = {g, cos, sin},
                         .flops = 3 * numel_d(x)},
                        {fq + ".grad_in", x.shape, g.dtype, kTmp});
    b.add_grad(x, dx, fq);
  });
  return y;
}

RotaryTables rotary_tables(Builder& b, int64_t seq, int64_t head_dim) {
  return {b.input("rope.cos", {seq, head_dim}, b.compute_dtype()),
          b.input("rope.sin", {seq, head_dim}, b.compute_dtype())};
}

Tensor llama_attention(Builder& b, std::string_view name, const Tensor& x, const RotaryTables& rope,
                       int64_t heads, int64_t kv_heads, bool flash) {
  const int64_t batch = x.shape.at(0), s = x.shape.at(1), h = x.shape.at(2);
  if (heads <= 0 || h % heads != 0) fail("model: hidden size must be a multiple of heads");
  const int64_t d = h / heads;
  const std::string n(name);
  if (tp_ranks(b) > 1) {
    // Note [Tensor parallelism in the zoo]: each rank's share of the query
    // heads and of the key-value groups (Megatron-LM splits both), the
    // input gathered once along the sequence for the three projections.
    check_tp_split(b, heads, "attention heads");
    check_tp_split(b, kv_heads, "key-value heads");
    const int64_t t = tp_ranks(b), local = heads / t, kv_local = kv_heads / t;
    const std::vector<Tensor> qkv = column_parallel_linears(
        b, x, {{n + ".wq", heads * d}, {n + ".wk", kv_heads * d}, {n + ".wv", kv_heads * d}});
    const int64_t whole = qkv[0].shape.at(1);
    Tensor qr = rotary(b, n + ".rotary_q", b.view(qkv[0], {batch, whole, local, d}), rope.cos,
                       rope.sin);
    Tensor kr = rotary(b, n + ".rotary_k", b.view(qkv[1], {batch, whole, kv_local, d}), rope.cos,
                       rope.sin);
    Tensor ctx = attention(
        b, name, qr, kr, b.view(qkv[2], {batch, kv_local, whole, d}),
        {.heads = local, .kv_heads = kv_local, .causal = true, .flash = flash});
    return row_parallel_linear(b, n + ".wo", ctx, h, false);
  }
  // q_proj, k_proj, v_proj, then view + transpose (no copies), then
  // apply_rotary_pos_emb on q and k.
  Tensor q = linear_layer(b, n + ".wq", x, heads * d, false);
  Tensor k = linear_layer(b, n + ".wk", x, kv_heads * d, false);
  Tensor v = linear_layer(b, n + ".wv", x, kv_heads * d, false);
  Tensor qr = rotary(b, n + ".rotary_q", b.view(q, {batch, s, heads, d}), rope.cos, rope.sin);
  Tensor kr = rotary(b, n + ".rotary_k", b.view(k, {batch, s, kv_heads, d}), rope.cos, rope.sin);
  Tensor vv = b.view(v, {batch, kv_heads, s, d});
  Tensor ctx = attention(b, name, qr, kr, vv,
                         {.heads = heads, .kv_heads = kv_heads, .causal = true, .flash = flash});
  return linear_layer(b, n + ".wo", ctx, h, false);
}

namespace {

// The SwiGLU body in the current scope, in Hugging Face's evaluation order:
// down_proj(act_fn(gate_proj(x)) * up_proj(x)).
Tensor swiglu_body(Builder& b, const Tensor& x, int64_t ffn) {
  const int64_t h = x.shape.back();
  Tensor gate = linear_layer(b, "w1", x, ffn, false);
  Tensor act = silu(b, "act", gate);
  Tensor up = linear_layer(b, "w3", x, ffn, false);
  Tensor gated = mul(b, "gated", act, up);
  return linear_layer(b, "w2", gated, h, false);
}

}  // namespace

Tensor swiglu_mlp(Builder& b, std::string_view name, const Tensor& x, int64_t ffn) {
  auto scope = b.scope(name);
  if (tp_ranks(b) == 1) return swiglu_body(b, x, ffn);
  // Tensor parallel: gate and up column-parallel (Megatron-LM's fused
  // linear_fc1), down row-parallel.
  const std::vector<Tensor> gate_up = column_parallel_linears(b, x, {{"w1", ffn}, {"w3", ffn}});
  Tensor act = silu(b, "act", gate_up[0]);
  Tensor gated = mul(b, "gated", act, gate_up[1]);
  return row_parallel_linear(b, "w2", gated, x.shape.back(), false);
}

int64_t moe_tokens_per_expert(int64_t tokens, const MoeOptions& opts) {
  if (tokens <= 0 || opts.experts <= 0 || opts.top_k <= 0 || opts.top_k > opts.experts) {
    fail("model: mixture of experts needs tokens > 0 and 0 < top_k <= experts");
  }
  const int64_t assignments = tokens * opts.top_k;
  return (assignments + opts.experts - 1) / opts.experts;
}

Tensor moe(Builder& b, std::string_view name, const Tensor& x, const MoeOptions& opts) {
  if (x.shape.size() != 2) fail("model: moe {} expects x [tokens, hidden]", b.qualified(name));
  const int64_t n = x.shape[0], h = x.shape[1], e_count = opts.experts, k = opts.top_k;
  // Note [Tensor parallelism in the zoo]: each expert's width split over
  // the tensor-parallel ranks, its outputs partial sums (tp_region_output);
  // Note [Expert parallelism in the zoo]: experts / e experts a rank.
  check_tp_split(b, opts.ffn, "MLP widths of the experts");
  const int64_t ffn = opts.ffn / tp_ranks(b), ep = ep_ranks(b);
  if (ep < 1 || e_count % ep != 0) {
    fail("model {}: {} experts do not split over {} expert-parallel ranks", b.graph().name,
         e_count, ep);
  }
  const int64_t per_expert = moe_tokens_per_expert(n, opts);
  const DType dt = x.dtype;
  const std::string fq = b.qualified(name);
  auto scope = b.scope(name);

  // Router: logits in compute dtype, softmax in fp32 (HF passes dtype=float).
  Tensor logits = linear_layer(b, "gate", x, e_count, false);
  Tensor probs = b.emit1(
      {.name = "router_softmax", .type = "softmax", .in = {logits}, .flops = 5 * numel_d(logits)},
      {"router_probs", {n, e_count}, DType::kF32, kAct});
  b.propagate_requires_grad({logits}, {probs});
  b.on_backward([&b, fq, logits, probs] {
    Tensor g = b.grad(probs);
    if (!g.valid() || !b.requires_grad(logits)) return;
    Tensor d = b.emit1({.name = fq + ".router_softmax.bwd",
                        .type = "softmax_backward",
                        .phase = Phase::kBackward,
                        .in = {g, probs},
                        .flops = 4 * numel_d(probs)},
                       {fq + ".grad_router_logits", logits.shape, logits.dtype, kTmp});
    b.add_grad(logits, d, fq + ".router_softmax");
  });
  // top-k, renormalization over the k chosen and the cast to compute dtype,
  // fused: routing weights [n, k] and int64 expert indices [n, k].
  std::vector<Tensor> routed = b.emit(
      {.name = "router_topk",
       .type = "topk",
       .in = {probs},
       .flops = numel_d(probs) + 3 * dbl(n * k)},
      {{"routing_weights", {n, k}, dt, kAct}, {"expert_indices", {n, k}, DType::kI64, kAct}});
  Tensor weights = routed[0];
  Tensor indices = routed[1];
  b.propagate_requires_grad({probs}, {weights});
  b.on_backward([&b, fq, probs, weights, indices] {
    Tensor g = b.grad(weights);
    if (!g.valid() || !b.requires_grad(probs)) return;
    // Renormalization backward needs the weights; the scatter back into
    // [n, experts] (topk's backward) needs the indices.
    Tensor d = b.emit1({.name = fq + ".router_topk.bwd",
                        .type = "topk_backward",
                        .phase = Phase::kBackward,
                        .in = {g, weights, indices},
                        .flops = 4 * numel_d(weights)},
                       {fq + ".grad_router_probs", probs.shape, DType::kF32, kTmp});
    b.add_grad(probs, d, fq + ".router_topk");
  });

  if (ep > 1) {
    // Note [Expert parallelism in the zoo].
    const int64_t local = e_count / ep;
    const std::vector<Tensor> received =
        ep_dispatch(b, x, indices, local, moe_tokens_per_expert(n * ep, opts));
    std::vector<Tensor> outputs;
    for (int64_t j = 0; j < local; ++j) {
      auto expert_scope = b.scope(fmt::format("experts.{}", j));
      outputs.push_back(swiglu_body(b, received[j], ffn));
    }
    return ep_combine(b, outputs, weights, indices, n);
  }
  // final_hidden_states = zeros(n, h); each expert index_add_s into it.
  Tensor out = b.emit1({.name = "output_init", .type = "fill"}, {"output", {n, h}, dt, kAct});
  b.propagate_requires_grad({x, weights}, {out});
  for (int64_t e = 0; e < e_count; ++e) {
    const std::string en = fmt::format("experts.{}", e);
    const std::string fe = fq + "." + en;
    auto expert_scope = b.scope(en);
    // current_state = hidden_states[top_x]: the expert's tokens (the token
    // list torch.where builds from the indices is folded into the gather).
    Tensor tokens = b.emit1({.name = "gather", .type = "index_select", .in = {x, indices}},
                            {"tokens", {per_expert, h}, dt, kAct});
    b.propagate_requires_grad({x}, {tokens});
    b.on_backward([&b, fe, x, tokens, indices] {
      Tensor g = b.grad(tokens);
      if (!g.valid() || !b.requires_grad(x)) return;
      // IndexBackward: index_put_ with accumulate into zeros like x.
      Tensor dx = b.emit1({.name = fe + ".gather.bwd",
                           .type = "index_put",
                           .phase = Phase::kBackward,
                           .in = {g, indices},
                           .flops = numel_d(g)},
                          {fe + ".grad_input", x.shape, g.dtype, kTmp});
      b.add_grad(x, dx, fe + ".gather");
    });
    Tensor y = swiglu_body(b, tokens, ffn);
    // current_hidden_states * routing_weights[top_x, idx, None].
    Tensor scaled =
        b.emit1({.name = "scale", .type = "mul", .in = {y, weights, indices}, .flops = numel_d(y)},
                {"scaled", y.shape, dt, kAct});
    b.propagate_requires_grad({y, weights}, {scaled});
    b.on_backward([&b, fe, y, weights, indices, scaled] {
      Tensor g = b.grad(scaled);
      if (!g.valid()) return;
      if (b.requires_grad(y)) {
        Tensor dy = b.emit1({.name = fe + ".scale.bwd_input",
                             .type = "mul",
                             .phase = Phase::kBackward,
                             .in = {g, weights, indices},
                             .flops = numel_d(y)},
                            {fe + ".grad_expert_out", y.shape, g.dtype, kTmp});
        b.add_grad(y, dy, fe + ".scale");
      }
      if (b.requires_grad(weights)) {
        // Row dot products g . y, scattered to [n, k] at this expert's slots.
        Tensor dw = b.emit1({.name = fe + ".scale.bwd_weight",
                             .type = "mul_sum",
                             .phase = Phase::kBackward,
                             .in = {g, y, indices},
                             .flops = 2 * numel_d(y)},
                            {fe + ".grad_routing_weights", weights.shape, g.dtype, kTmp});
        b.add_grad(weights, dw, fe + ".scale_weight");
      }
    });
    // final_hidden_states.index_add_(0, top_x, scaled): in place.
    b.emit({.name = "scatter_add",
            .type = "index_add",
            .in = {scaled, indices},
            .updates = {out},
            .flops = numel_d(scaled),
            .bytes = traffic({scaled, indices}) + 2 * static_cast<double>(scaled.bytes())},
           {});
    b.on_backward([&b, fe, out, scaled, indices] {
      Tensor g = b.grad(out);
      if (!g.valid() || !b.requires_grad(scaled)) return;
      Tensor d = b.emit1({.name = fe + ".scatter_add.bwd",
                          .type = "index_select",
                          .phase = Phase::kBackward,
                          .in = {g, indices}},
                         {fe + ".grad_scaled", scaled.shape, g.dtype, kTmp});
      b.add_grad(scaled, d, fe + ".scatter_add");
    });
  }
  return out;
}

Tensor add_broadcast(Builder& b, std::string_view name, const Tensor& x, const Tensor& rows) {
  if (x.shape.size() != 3 || rows.shape != std::vector<int64_t>{x.shape[1], x.shape[2]}) {
    fail("model: add_broadcast {} expects x [b, s, h] and rows [s, h]", b.qualified(name));
  }
  const std::string n(name);
  const std::string fq = b.qualified(name);
  Tensor z = b.emit1({.name = n, .type = "add", .in = {x, rows}, .flops = numel_d(x)},
                     {n, x.shape, x.dtype, kAct});
  b.propagate_requires_grad({x, rows}, {z});
  b.on_backward([&b, fq, x, rows, z] {
    Tensor g = b.grad(z);
    if (!g.valid()) return;
    b.add_grad(x, g, fq + ".lhs");
    if (!b.requires_grad(rows)) return;
    if (x.shape[0] == 1) {
      b.add_grad(rows, b.view(g, rows.shape), fq + ".rhs");
      return;
    }
    Tensor d = b.emit1({.name = fq + ".bwd_rows",
                        .type = "sum",
                        .phase = Phase::kBackward,
                        .in = {g},
                        .flops = numel_d(g)},
                       {fq + ".grad_rows", rows.shape, g.dtype, kTmp});
    b.add_grad(rows, d, fq + ".rhs");
  });
  return z;
}

}  // namespace memwall::models
