// Context parallelism in the zoo (context_parallel.h).
//
// Note [Context parallelism in the zoo]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With ModelOptions::context_parallel c > 1 a GPT-2 or Llama graph is one
// of c ranks that split every sequence (Megatron-LM's --context-parallel-
// size, Llama 3's long-context training): the sequence is cut into 2c
// chunks and rank r holds chunks r and 2c-1-r, so every op but attention
// runs on the rank's s/c positions alone, and causal attention costs every
// rank the same (TransformerEngine's load balancing). The parameters are
// whole on every rank; their gradients are reduced over the data-parallel
// and the context-parallel ranks together (the planner's concern: Note
// [Layout search] in src/planner/pipeline_layout.cc).
// Attention is TransformerEngine's ring (AttnFuncWithCPAndKVP2P, Liu et
// al. 2023's ring attention with flash kernels; Megatron-LM's default
// cp_comm_type "p2p"), which needs --flash. Forward:
//   - k and v are packed into one buffer kv [2, b, kv_heads, s/c, d]
//     (saved for backward with q, the output and its log-sum-exp);
//   - c steps: step i runs a blockwise flash kernel of the rank's queries
//     over the kv block it holds, while a cp_send_recv comm op passes that
//     block to the next rank and receives the next one (two blocks live at
//     once; c - 1 exchanges of kv's bytes). Each step has the FLOPs of a
//     causal kernel over s/c positions: step 0 is the rank's own two chunks
//     under the mask, every later step half of an unmasked block (half the
//     queries or half the keys), so the rank's c steps do 1/c of the whole
//     sequence's causal attention;
//   - every step's partial output (compute dtype) and log-sum-exp (fp32)
//     stay until the steps are done, and one correction kernel combines
//     them into the output (TE keeps out_per_step and softmax_lse_per_step
//     for all c steps and corrects after the loop).
// Backward: the kv blocks go round again (c - 1 exchanges); step i's
// flash backward kernel (2.5x the forward's FLOPs, flash-attn 2's
// workspace) makes the step's dq and dkv, which are added to the rank's dq
// and to the dkv accumulator of the block it holds; that accumulator
// travels with the blocks one step behind (c - 1 exchanges of dkv), so
// each exchange runs beside the next step's kernel. The last accumulator
// is the rank's own dk and dv (views of it, as TE returns them).
// A cp_send_recv is one hop of a ring: every rank sends `bytes` to the
// next at once (Note [Collective time] in src/hw/ranks.cc), and it runs
// beside the compute op after it: the simulator runs it on the comm
// stream, and a pipeline chunk counts only what the next kernel does not
// hide (Note [Pipeline chunks]). Not modelled: TE's per-step RNG states and
// cu_seqlens (bytes), the all-gather variant (cp_comm_type "all_gather",
// Llama 3's), and fp32 dkv accumulation under FP8.
#include "context_parallel.h"

#include <vector>

#include <fmt/format.h>

#include "memwall/base/error.h"

namespace memwall::models {
namespace {

using attention_parts::dbl;
using attention_parts::distinct;
using attention_parts::QkvGradients;

// One hop of the ring: `x` to the next rank, the previous rank's into a
// new buffer.
Tensor send_recv(Builder& b, const std::string& name, const Tensor& x, BufferKind kind) {
  return b.emit1({.name = name,
                  .type = "cp_send_recv",
                  .phase = Phase::kComm,
                  .in = {x},
                  .bytes = static_cast<double>(x.bytes())},
                 {name, x.shape, x.dtype, kind});
}

}  // namespace

int64_t cp_ranks(const Builder& b) { return b.options().context_parallel; }

int64_t cp_local_seq(const Builder& b, int64_t seq) {
  const int64_t c = cp_ranks(b);
  if (c == 1) return seq;
  if (seq % (2 * c) != 0) {
    fail(
        "model {}: context parallelism cuts the sequence into 2 x {} equal chunks: {} positions "
        "do not split (give --seq a multiple of {})",
        b.graph().name, c, seq, 2 * c);
  }
  return seq / c;
}

Tensor ring_flash_attention(Builder& b, const std::string& fq, const Tensor& q, const Tensor& k,
                            const Tensor& v, const AttentionOptions& o,
                            const std::shared_ptr<QkvGradients>& sink) {
  const int64_t c = cp_ranks(b);
  const int64_t batch = q.shape[0], heads = o.heads, s = q.shape[2], d = q.shape[3];
  const DType dt = q.dtype;
  // A causal kernel over the rank's s positions: what every step costs.
  double step_flops = 4.0 * dbl(batch) * dbl(heads) * dbl(s) * dbl(s) * dbl(d);
  if (o.causal) step_flops /= 2;
  const std::vector<int64_t> kv_shape = {2, batch, o.kv_heads, s, d};
  const std::vector<int64_t> out_shape = {batch, s, heads * d};
  const std::vector<int64_t> lse_shape = {batch, heads, s};

  Tensor kv = b.emit1({.name = "kv_pack", .type = "cp_kv_pack", .in = distinct({k, v})},
                      {"kv", kv_shape, k.dtype, kAct});
  std::vector<Tensor> partials;  // outputs and log-sum-exps, every step's
  Tensor block = kv;
  for (int64_t i = 0; i < c; ++i) {
    Tensor next;
    if (i + 1 < c) next = send_recv(b, fmt::format("ring{}.send_recv", i), block, kTmp);
    std::vector<Tensor> step =
        b.emit({.name = fmt::format("ring{}", i),
                .type = "flash_attention_ring_step",
                .in = distinct({q, block}),
                .flops = step_flops},
               {{fmt::format("ring{}.out", i), out_shape, dt, kTmp},
                {fmt::format("ring{}.lse", i), lse_shape, DType::kF32, kTmp}});
    partials.insert(partials.end(), step.begin(), step.end());
    block = next;
  }
  // Rescale each step's output by exp(lse_i - lse) and sum: ~4 FLOPs an
  // element a step.
  std::vector<Tensor> outs =
      b.emit({.name = "ring_correction",
              .type = "cp_out_correction",
              .in = partials,
              .flops = 4.0 * dbl(c) * dbl(batch * s * heads * d)},
             {{"context", out_shape, dt, kAct}, {"lse", lse_shape, DType::kF32, kAct}});
  Tensor out = outs[0];
  Tensor lse = outs[1];
  b.propagate_requires_grad({q, k, v}, {out});

  const uint64_t workspace =
      attention_parts::flash_backward_workspace(batch, s, heads, d, o.kv_heads, dt);
  b.on_backward([&b, fq, q, k, v, kv, out, lse, c, step_flops, workspace, sink] {
    Tensor g = b.grad(out);
    if (!g.valid()) return;
    Tensor dq, dkv;  // the rank's dq, the held block's dkv accumulator
    Tensor held = kv;
    for (int64_t i = 0; i < c; ++i) {
      const std::string step = fmt::format("{}.ring{}", fq, i);
      Tensor next, arriving;
      if (i + 1 < c) next = send_recv(b, step + ".bwd_send_recv_kv", held, kTmp);
      if (i > 0) arriving = send_recv(b, step + ".bwd_send_recv_dkv", dkv, kTmp);
      std::vector<Tensor> grads = b.emit({.name = step + ".bwd",
                                          .type = "flash_attention_ring_step_backward",
                                          .phase = Phase::kBackward,
                                          .in = distinct({g, q, held, out, lse}),
                                          .workspace = workspace,
                                          .flops = 2.5 * step_flops},
                                         {{step + ".grad_q", q.shape, g.dtype, kTmp},
                                          {step + ".grad_kv", held.shape, g.dtype, kTmp}});
      if (i == 0) {
        dq = grads[0];
        dkv = grads[1];
      } else {
        b.emit({.name = step + ".accumulate",
                .type = "cp_grad_accumulate",
                .phase = Phase::kBackward,
                .in = {grads[0], grads[1], dq, arriving},
                .updates = {dq, arriving},
                .flops = numel_d(grads[0]) + numel_d(grads[1])},
               {});
        dkv = arriving;
      }
      held = next;
    }
    if (b.requires_grad(q)) sink->deliver(b, 0, dq);
    if (b.requires_grad(k)) sink->deliver(b, 1, Tensor{dkv.id, k.shape, dkv.dtype});
    if (b.requires_grad(v)) sink->deliver(b, 2, Tensor{dkv.id, v.shape, dkv.dtype});
  });
  return out;
}

}  // namespace memwall::models
