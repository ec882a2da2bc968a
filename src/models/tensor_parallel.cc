// Tensor and sequence parallelism in the zoo (tensor_parallel.h).
//
// Note [Tensor parallelism in the zoo]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With ModelOptions::tensor_parallel t > 1 a zoo transformer is built as
// one of t ranks runs it under Megatron-LM (Shoeybi et al. 2019, sec. 3):
// the attention heads and the MLP's width are split, the QKV and first MLP
// matmuls by output rows (column parallel), the projections after them by
// input columns (row parallel), and the embedding table by vocabulary rows.
// The collectives are comm ops of types tp_all_reduce, tp_all_gather and
// tp_reduce_scatter, timed over the t ranks of the graph's meta
// "tensor_parallel" (Note [Collective time] in src/hw/ranks.cc), with the
// bytes each rank sends in a ring: 2(t-1)/t of an all-reduced buffer,
// (t-1)/t of a gathered or scattered one's whole.
//  - Without sequence parallelism the activations outside the split
//    matmuls are whole on every rank: a row-parallel output is all-reduced
//    in place (Megatron's g), and the gradient of a column-parallel input
//    is all-reduced in backward (f).
//  - With it (Korthikanti et al. 2022, sec. 4.2.2) they are split along the
//    sequence: the norms, dropouts and residual adds run on [b, s/t, h]; a
//    column-parallel matmul all-gathers its input, and its backward gathers
//    it again instead of saving the whole (Megatron's
//    LinearWithGradAccumulationAndAsyncCommunication), then
//    reduce-scatters the input's gradient; a row-parallel output is
//    reduce-scattered, its gradient all-gathered.
// Llama's separate projections (wq, wk, wv; w1, w3) share one gathered
// input and one reduced gradient, as Megatron-LM's fused linear_qkv and
// linear_fc1 do (column_parallel_linears), the key-value groups split with
// the query heads.
// A GPT-2 layer then saves sbh(10 + 24/t + 5as/(ht)) bytes, or sbh/t (34 +
// 5as/h) with sequence parallelism (Korthikanti et al., eqs. 2 and 3;
// tests/models/tensor_parallel_test.cc checks both to the byte). Not
// modelled: the all-reduce of the sequence-parallel norms' and biases'
// gradients over the ranks (h-sized), and the masks of the vocab-parallel
// lookup and loss (integers per token).
#include "tensor_parallel.h"

#include <string>
#include <vector>

#include "layers.h"
#include "memwall/base/error.h"

namespace memwall::models {
namespace {

std::vector<int64_t> with_seq(std::vector<int64_t> shape, int64_t seq) {
  shape.at(1) = seq;
  return shape;
}

// The bytes one rank sends in a ring collective over t ranks.
double ring_share(const Builder& b) {
  const auto t = static_cast<double>(tp_ranks(b));
  return (t - 1) / t;
}

// `x` whole on every rank, in place (the op updates it): one tp_all_reduce.
void all_reduce(Builder& b, const std::string& name, const Tensor& x) {
  b.emit({.name = name,
          .type = "tp_all_reduce",
          .phase = Phase::kComm,
          .in = {x},
          .updates = {x},
          .bytes = 2 * ring_share(b) * static_cast<double>(x.bytes())},
         {});
}

// [b, s/t, ...] -> [b, s, ...] (no autograd: the callers say where the
// gradient goes).
Tensor all_gather(Builder& b, const std::string& name, const Tensor& x, BufferKind kind) {
  const std::vector<int64_t> shape = with_seq(x.shape, x.shape.at(1) * tp_ranks(b));
  Tensor whole = b.emit1(
      {.name = name,
       .type = "tp_all_gather",
       .phase = Phase::kComm,
       .in = {x},
       .bytes = ring_share(b) * static_cast<double>(x.bytes()) * static_cast<double>(tp_ranks(b))},
      {name, shape, x.dtype, kind});
  return whole;
}

// [b, s, ...] -> [b, s/t, ...], summing the ranks' partial values.
Tensor reduce_scatter(Builder& b, const std::string& name, const Tensor& x, BufferKind kind) {
  const std::vector<int64_t> shape = with_seq(x.shape, x.shape.at(1) / tp_ranks(b));
  return b.emit1({.name = name,
                  .type = "tp_reduce_scatter",
                  .phase = Phase::kComm,
                  .in = {x},
                  .bytes = ring_share(b) * static_cast<double>(x.bytes())},
                 {name, shape, x.dtype, kind});
}

// The partial sums of a row-parallel matmul or a vocab-parallel lookup made
// whole (g): all-reduced in place, or reduce-scattered along the sequence,
// whose gradient is all-gathered back to the partial's shape.
Tensor sum_partials(Builder& b, std::string_view name, const Tensor& partial) {
  const std::string n(name);
  if (!tp_sequence(b)) {
    all_reduce(b, n + ".all_reduce", partial);
    return partial;  // the same buffer, its next version after finish()
  }
  const std::string fq = b.qualified(name);
  Tensor shard = reduce_scatter(b, n + ".reduce_scatter", partial, kAct);
  b.propagate_requires_grad({partial}, {shard});
  b.on_backward([&b, fq, partial, shard] {
    Tensor g = b.grad(shard);
    if (!g.valid() || !b.requires_grad(partial)) return;
    b.add_grad(partial, all_gather(b, fq + ".grad.all_gather", g, kTmp), fq);
  });
  return shard;
}

// y = x W^T (+ bias) for a weight split by output rows (column parallel),
// W and bias given; see column_parallel_linear.
Tensor column_matmul(Builder& b, std::string_view name, const Tensor& x, const Tensor& weight,
                     const Tensor& bias) {
  const std::string n(name), fq = b.qualified(name);
  const int64_t in_features = weight.shape.at(1), out_local = weight.shape.at(0);
  if (x.shape.empty() || x.shape.back() != in_features) {
    fail("model: linear {} expects {} input features", fq, in_features);
  }
  const bool sequence = tp_sequence(b);
  const Tensor whole = sequence ? all_gather(b, n + ".all_gather", x, kAct) : x;
  const double rows = numel_d(whole) / static_cast<double>(in_features);
  const double mm_flops = 2.0 * rows * static_cast<double>(in_features * out_local);
  const double bias_flops = bias.valid() ? rows * static_cast<double>(out_local) : 0;
  std::vector<Tensor> ins = {whole, weight};
  if (bias.valid()) ins.push_back(bias);
  Tensor y = b.emit1({.name = n, .type = "matmul", .in = ins, .flops = mm_flops + bias_flops},
                     {n, with_last(whole.shape, out_local), b.compute_dtype(), kAct});
  b.propagate_requires_grad({x, weight, bias}, {y});
  b.on_backward([&b, fq, x, weight, bias, y, whole, sequence, mm_flops, bias_flops] {
    Tensor g = b.grad(y);
    if (!g.valid()) return;
    // Sequence parallel: the input gathered again, overlapping dX.
    const Tensor input = sequence ? all_gather(b, fq + ".regather", x, kTmp) : x;
    if (b.requires_grad(x)) {
      Tensor dx = b.emit1({.name = fq + ".bwd_input",
                           .type = "matmul",
                           .phase = Phase::kBackward,
                           .in = {g, weight},
                           .flops = mm_flops},
                          {fq + ".grad_in", whole.shape, g.dtype, kTmp});
      if (sequence) {
        dx = reduce_scatter(b, fq + ".grad_in.reduce_scatter", dx, kTmp);
      } else {
        all_reduce(b, fq + ".grad_in.all_reduce", dx);
      }
      b.add_grad(x, dx, fq);
    }
    std::vector<Tensor> params = {weight};
    if (bias.valid()) params.push_back(bias);
    b.emit_with_param_grads({.name = fq + ".bwd_weight",
                             .type = "matmul",
                             .phase = Phase::kBackward,
                             .in = {g, input},
                             .flops = mm_flops + bias_flops},
                            {}, params);
  });
  return y;
}

}  // namespace

int64_t tp_ranks(const Builder& b) { return b.options().tensor_parallel; }

bool tp_sequence(const Builder& b) {
  return b.options().tensor_parallel > 1 && b.options().sequence_parallel;
}

void check_tp_split(const Builder& b, int64_t extent, std::string_view what) {
  if (extent % tp_ranks(b) != 0) {
    fail("model {}: {} {} do not split over {} tensor-parallel ranks", b.graph().name, extent, what,
         tp_ranks(b));
  }
}

int64_t tp_padded_vocab(const Builder& b, int64_t vocab) {
  const int64_t t = tp_ranks(b);
  if (t == 1) return vocab;
  const int64_t multiple = 128 * t;
  return (vocab + multiple - 1) / multiple * multiple;
}

int64_t tp_local_seq(const Builder& b, int64_t seq) {
  if (!tp_sequence(b)) return seq;
  check_tp_split(b, seq, "sequence positions");
  return seq / tp_ranks(b);
}

Tensor column_parallel_linear(Builder& b, std::string_view name, const Tensor& x,
                              int64_t out_features, bool with_bias) {
  if (tp_ranks(b) == 1) return linear_layer(b, name, x, out_features, with_bias);
  check_tp_split(b, out_features, "outputs of " + b.qualified(name));
  const std::string n(name);
  const int64_t local = out_features / tp_ranks(b);
  Tensor weight = b.param(n + ".weight", {local, x.shape.back()});
  Tensor bias = with_bias ? b.param(n + ".bias", {local}) : Tensor{};
  return column_matmul(b, name, x, weight, bias);
}

std::vector<Tensor> column_parallel_linears(Builder& b, const Tensor& x,
                                            const std::vector<ColumnPart>& parts) {
  std::vector<Tensor> outputs;
  if (tp_ranks(b) == 1) {
    for (const ColumnPart& part : parts) {
      outputs.push_back(linear_layer(b, part.name, x, part.out_features, false));
    }
    return outputs;
  }
  const int64_t in_features = x.shape.back();
  const bool sequence = tp_sequence(b);
  const std::string first = b.qualified(parts.at(0).name);
  const Tensor whole = sequence ? all_gather(b, parts[0].name + ".all_gather", x, kAct) : x;
  const double rows = numel_d(whole) / static_cast<double>(in_features);
  std::vector<Tensor> weights;
  std::vector<double> flops;
  for (const ColumnPart& part : parts) {
    check_tp_split(b, part.out_features, "outputs of " + b.qualified(part.name));
    const int64_t local = part.out_features / tp_ranks(b);
    weights.push_back(b.param(part.name + ".weight", {local, in_features}));
    flops.push_back(2.0 * rows * static_cast<double>(in_features * local));
    Tensor y = b.emit1({.name = part.name, .type = "matmul", .in = {whole, weights.back()},
                        .flops = flops.back()},
                       {part.name, with_last(whole.shape, local), b.compute_dtype(), kAct});
    b.propagate_requires_grad({x, weights.back()}, {y});
    outputs.push_back(y);
  }
  std::vector<std::string> names;
  for (const ColumnPart& part : parts) names.push_back(b.qualified(part.name));
  // Registered after every part: runs once their consumers have delivered
  // the parts' gradients.
  b.on_backward([&b, first, names, x, whole, weights, flops, outputs, sequence] {
    const Tensor input = sequence ? all_gather(b, first + ".regather", x, kTmp) : x;
    Tensor dx;
    for (size_t i = 0; i < outputs.size(); ++i) {
      Tensor g = b.grad(outputs[i]);
      if (!g.valid()) continue;
      if (b.requires_grad(x)) {
        // dX += dY_i W_i: the first part makes it, the others add in place.
        if (!dx.valid()) {
          dx = b.emit1({.name = names[i] + ".bwd_input",
                        .type = "matmul",
                        .phase = Phase::kBackward,
                        .in = {g, weights[i]},
                        .flops = flops[i]},
                       {first + ".grad_in", whole.shape, g.dtype, kTmp});
        } else {
          b.emit({.name = names[i] + ".bwd_input",
                  .type = "matmul",
                  .phase = Phase::kBackward,
                  .in = {g, weights[i], dx},
                  .updates = {dx},
                  .flops = flops[i]},
                 {});
        }
      }
      b.emit_with_param_grads({.name = names[i] + ".bwd_weight",
                               .type = "matmul",
                               .phase = Phase::kBackward,
                               .in = {g, input},
                               .flops = flops[i]},
                              {}, {weights[i]});
    }
    if (!dx.valid()) return;
    if (sequence) {
      dx = reduce_scatter(b, first + ".grad_in.reduce_scatter", dx, kTmp);
    } else {
      all_reduce(b, first + ".grad_in.all_reduce", dx);
    }
    b.add_grad(x, dx, first);
  });
  return outputs;
}

Tensor row_parallel_linear(Builder& b, std::string_view name, const Tensor& x, int64_t out_features,
                           bool with_bias) {
  if (tp_ranks(b) == 1) return linear_layer(b, name, x, out_features, with_bias);
  const std::string n(name), fq = b.qualified(name);
  Tensor weight = b.param(n + ".weight", {out_features, x.shape.back()});
  Tensor partial = linear(b, n + ".partial", x, weight, Tensor{});
  Tensor y = sum_partials(b, n, partial);
  if (!with_bias) return y;
  // The bias, whole on every rank, once after the sum (Megatron adds it
  // in its fused bias-dropout-add; here an add of its own, saving nothing).
  Tensor bias = b.param(n + ".bias", {out_features});
  Tensor z = b.emit1({.name = n, .type = "add", .in = {y, bias}, .flops = numel_d(y)},
                     {n, y.shape, y.dtype, kAct});
  b.propagate_requires_grad({y, bias}, {z});
  b.on_backward([&b, fq, y, bias, z] {
    Tensor g = b.grad(z);
    if (!g.valid()) return;
    b.add_grad(y, g, fq + ".bias_add");
    b.emit_with_param_grads({.name = fq + ".bias.bwd",
                             .type = "sum",
                             .phase = Phase::kBackward,
                             .in = {g},
                             .flops = numel_d(g)},
                            {}, {bias});
  });
  return z;
}

Tensor tp_region_input(Builder& b, std::string_view name, const Tensor& x) {
  if (tp_ranks(b) == 1) return x;
  const std::string n(name), fq = b.qualified(name);
  if (!tp_sequence(b)) {
    b.on_backward([&b, fq, x] {
      Tensor g = b.grad(x);
      if (g.valid()) all_reduce(b, fq + ".grad.all_reduce", g);
    });
    return x;
  }
  Tensor whole = all_gather(b, n + ".all_gather", x, kAct);
  b.propagate_requires_grad({x}, {whole});
  b.on_backward([&b, fq, x, whole] {
    Tensor g = b.grad(whole);
    if (!g.valid() || !b.requires_grad(x)) return;
    b.add_grad(x, reduce_scatter(b, fq + ".grad.reduce_scatter", g, kTmp), fq);
  });
  return whole;
}

Tensor tp_region_output(Builder& b, std::string_view name, const Tensor& partial) {
  if (tp_ranks(b) == 1) return partial;
  return sum_partials(b, name, partial);
}

Tensor vocab_parallel_embedding(Builder& b, std::string_view name, const Tensor& ids,
                                const Tensor& table) {
  Tensor partial = embedding(b, name, ids, table);
  if (tp_ranks(b) == 1) return partial;
  return sum_partials(b, name, partial);
}

Tensor vocab_parallel_logits(Builder& b, std::string_view name, const Tensor& x,
                             const Tensor& table) {
  if (tp_ranks(b) == 1) return linear(b, name, x, table, Tensor{});
  return column_matmul(b, name, x, table, Tensor{});
}

Tensor vocab_parallel_cross_entropy(Builder& b, std::string_view name, const Tensor& logits,
                                    const Tensor& labels) {
  Tensor loss = cross_entropy(b, name, logits, labels);
  if (tp_ranks(b) == 1) return loss;
  b.emit({.name = std::string(name) + ".all_reduce",
          .type = "tp_all_reduce",
          .phase = Phase::kComm,
          .in = {loss},
          .updates = {loss},
          .bytes = 2 * ring_share(b) * 3.0 * 4.0 * static_cast<double>(labels.numel())},
         {});
  return loss;
}

}  // namespace memwall::models
