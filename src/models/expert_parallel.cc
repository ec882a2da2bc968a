// Expert parallelism in the zoo (expert_parallel.h).
//
// Note [Expert parallelism in the zoo]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With ModelOptions::expert_parallel e > 1 each of e data-parallel ranks
// holds experts / e of a mixture-of-experts layer's experts (GShard,
// Lepikhin et al. 2021; DeepSpeed-MoE and Megatron-Core's alltoall token
// dispatcher). Everything else is replicated as data parallelism has it; a
// rank routes its own n tokens (router, softmax, top-k as in moe()), then:
//  - dispatch: the n k routed copies, permuted into expert order (an
//    index_select, [n k, h]), go by one all-to-all to the ranks holding
//    their experts. Under balanced routing (moe_tokens_per_expert) a local
//    expert receives ceil(n e k / experts) tokens from the e ranks, and a
//    rank sends (e-1)/e of its n k h elements;
//  - the local experts run on what they received (SwiGLU, ffn / t wide under
//    tensor parallelism);
//  - combine: the outputs go home by the reverse all-to-all ([n k, h],
//    saved for the routing weights' gradient), are weighted and summed into
//    the token rows (one index_add, Megatron-Core's unpermute).
// The backward runs the two all-to-alls in reverse with the gradients: four
// a layer and micro-batch, each timed by Note [Collective time]'s
// all-to-all over the group of e consecutive data-parallel ranks
// (gpus_per_node / t of them in a node). The experts' parameters are one
// rank's of e; their gradients are averaged over the d / e ranks holding the
// same experts, the others' over all d (pipeline_plan.cc).
// Not modelled: the router's load imbalance (balanced routing is the
// auxiliary loss's target), the token counts exchanged before the tokens
// (an all-to-all of e integers), and capacity-factor dropping or padding.
#include "expert_parallel.h"

#include <string>

#include <fmt/format.h>

namespace memwall::models {
namespace {

// Bytes a rank sends in an all-to-all of `whole` bytes over e ranks: all
// but its own share.
double all_to_all_bytes(const Builder& b, double whole) {
  const auto e = static_cast<double>(ep_ranks(b));
  return whole * (e - 1) / e;
}

}  // namespace

int64_t ep_ranks(const Builder& b) { return b.options().expert_parallel; }

std::vector<Tensor> ep_dispatch(Builder& b, const Tensor& x, const Tensor& indices,
                                int64_t local_experts, int64_t per_expert) {
  const int64_t n = x.shape.at(0), h = x.shape.at(1), k = indices.shape.at(1);
  const DType dt = x.dtype;
  const std::string fq = b.qualified("dispatch");
  Tensor permuted = b.emit1({.name = "dispatch.permute", .type = "index_select", .in = {x, indices}},
                            {"dispatch.permuted", {n * k, h}, dt, kAct});
  b.propagate_requires_grad({x}, {permuted});
  b.on_backward([&b, fq, x, indices, permuted] {
    Tensor g = b.grad(permuted);
    if (!g.valid() || !b.requires_grad(x)) return;
    // Each token's k copies' gradients summed into its row.
    Tensor dx = b.emit1({.name = fq + ".permute.bwd",
                         .type = "index_add",
                         .phase = Phase::kBackward,
                         .in = {g, indices},
                         .flops = numel_d(g)},
                        {fq + ".grad_input", x.shape, g.dtype, kTmp});
    b.add_grad(x, dx, fq + ".permute");
  });
  std::vector<Builder::OutSpec> outs;
  for (int64_t j = 0; j < local_experts; ++j) {
    outs.push_back({fmt::format("dispatch.expert{}", j), {per_expert, h}, dt, kAct});
  }
  std::vector<Tensor> received =
      b.emit({.name = "dispatch.all_to_all",
              .type = "ep_all_to_all",
              .phase = Phase::kComm,
              .in = {permuted},
              .bytes = all_to_all_bytes(b, static_cast<double>(permuted.bytes()))},
             outs);
  if (b.requires_grad(permuted)) {
    for (const Tensor& t : received) b.mark_requires_grad(t);
  }
  // Registered before the experts: runs after their gradients arrived.
  b.on_backward([&b, fq, permuted, received] {
    if (!b.requires_grad(permuted)) return;
    std::vector<Tensor> grads;
    for (const Tensor& t : received) {
      if (b.grad(t).valid()) grads.push_back(b.grad(t));
    }
    if (grads.empty()) return;
    Tensor back = b.emit1({.name = fq + ".all_to_all.bwd",
                           .type = "ep_all_to_all",
                           .phase = Phase::kComm,
                           .in = grads,
                           .bytes = all_to_all_bytes(b, static_cast<double>(permuted.bytes()))},
                          {fq + ".grad_permuted", permuted.shape, grads[0].dtype, kTmp});
    b.add_grad(permuted, back, fq + ".all_to_all");
  });
  return received;
}

Tensor ep_combine(Builder& b, const std::vector<Tensor>& outputs, const Tensor& weights,
                  const Tensor& indices, int64_t tokens) {
  const int64_t h = outputs.at(0).shape.at(1), k = weights.shape.at(1);
  const DType dt = outputs[0].dtype;
  const std::string fq = b.qualified("combine");
  // The rank's n k routed copies come home (their share of the sum of the
  // outputs' bytes).
  const Tensor home_shape{-1, {tokens * k, h}, dt};
  const double sent = all_to_all_bytes(b, static_cast<double>(home_shape.bytes()));
  Tensor combined = b.emit1({.name = "combine.all_to_all",
                             .type = "ep_all_to_all",
                             .phase = Phase::kComm,
                             .in = outputs,
                             .bytes = sent},
                            {"combine.received", {tokens * k, h}, dt, kAct});
  bool any = false;
  for (const Tensor& y : outputs) any = any || b.requires_grad(y);
  if (any) b.mark_requires_grad(combined);
  b.on_backward([&b, fq, outputs, combined, sent] {
    Tensor g = b.grad(combined);
    if (!g.valid()) return;
    std::vector<Builder::OutSpec> outs;
    for (size_t j = 0; j < outputs.size(); ++j) {
      outs.push_back({fmt::format("{}.grad_expert{}", fq, j), outputs[j].shape, g.dtype, kTmp});
    }
    std::vector<Tensor> back = b.emit({.name = fq + ".all_to_all.bwd",
                                       .type = "ep_all_to_all",
                                       .phase = Phase::kComm,
                                       .in = {g},
                                       .bytes = sent},
                                      outs);
    for (size_t j = 0; j < outputs.size(); ++j) {
      b.add_grad(outputs[j], back[j], fq + ".all_to_all");
    }
  });
  Tensor out = b.emit1({.name = "combine.unpermute",
                        .type = "index_add",
                        .in = {combined, weights, indices},
                        .flops = 2 * numel_d(combined)},
                       {"combine.output", {tokens, h}, dt, kAct});
  b.propagate_requires_grad({combined, weights}, {out});
  b.on_backward([&b, fq, combined, weights, indices, out] {
    Tensor g = b.grad(out);
    if (!g.valid()) return;
    if (b.requires_grad(combined)) {
      // Each copy's gradient: its token's row times its routing weight.
      Tensor d = b.emit1({.name = fq + ".unpermute.bwd_input",
                          .type = "index_select",
                          .phase = Phase::kBackward,
                          .in = {g, weights, indices},
                          .flops = numel_d(combined)},
                         {fq + ".grad_received", combined.shape, g.dtype, kTmp});
      b.add_grad(combined, d, fq + ".unpermute");
    }
    if (b.requires_grad(weights)) {
      Tensor dw = b.emit1({.name = fq + ".unpermute.bwd_weight",
                           .type = "mul_sum",
                           .phase = Phase::kBackward,
                           .in = {g, combined, indices},
                           .flops = 2 * numel_d(combined)},
                          {fq + ".grad_routing_weights", weights.shape, g.dtype, kTmp});
      b.add_grad(weights, dw, fq + ".unpermute_weight");
    }
  });
  return out;
}

}  // namespace memwall::models
