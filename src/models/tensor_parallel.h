// Megatron-LM tensor parallelism (Shoeybi et al. 2019) and its sequence
// parallelism (Korthikanti et al. 2022) as the zoo builds one rank's graph
// (Note [Tensor parallelism in the zoo] in tensor_parallel.cc). With
// ModelOptions::tensor_parallel 1 every function here is the plain layer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "builder.h"

namespace memwall::models {

// The tensor-parallel ranks t (1: none) and whether activations outside
// the matmuls are split along the sequence.
int64_t tp_ranks(const Builder& b);
bool tp_sequence(const Builder& b);

// Checks that `extent` (heads, a matmul's outputs, the sequence) splits
// evenly over the ranks; `what` names its units, plural ("attention
// heads"), in the error.
void check_tp_split(const Builder& b, int64_t extent, std::string_view what);

// The vocabulary as Megatron pads it to split over t ranks: a multiple of
// 128 t (make_vocab_size_divisible_by times the tensor-parallel size);
// `vocab` itself with one rank.
int64_t tp_padded_vocab(const Builder& b, int64_t vocab);

// The rows of the sequence a rank holds between the matmuls: s / t with
// sequence parallelism, s without (checked to divide).
int64_t tp_local_seq(const Builder& b, int64_t seq);

// A linear layer whose weight is split by output rows (Megatron's
// ColumnParallelLinear: QKV, the MLP's first layer): weight [out/t, in],
// bias [out/t]. Its input x is the replicated [b, s, in] (its gradient
// all-reduced in backward: Megatron's f) or, with sequence parallelism, the
// rank's [b, s/t, in], all-gathered before the matmul and again in backward
// rather than saved (its gradient reduce-scattered). Returns [b, s, out/t].
Tensor column_parallel_linear(Builder& b, std::string_view name, const Tensor& x,
                              int64_t out_features, bool with_bias);

// Column-parallel linear layers sharing one input, as Megatron-LM fuses
// them (linear_qkv, linear_fc1) and Llama keeps them apart (wq, wk, wv; w1,
// w3): each part's weight [out/t, in] without bias, its output [b, s,
// out/t]. The input is gathered once (sequence parallelism) and its
// gradient, accumulated over the parts' matmuls in place, reduced once.
// With one rank, linear_layer for each part.
struct ColumnPart {
  std::string name;
  int64_t out_features = 0;
};
std::vector<Tensor> column_parallel_linears(Builder& b, const Tensor& x,
                                            const std::vector<ColumnPart>& parts);

// A linear layer whose weight is split by input columns (RowParallelLinear:
// the attention projection, the MLP's second layer): weight [out, in/t] on
// x [b, s, in/t]; the partial sums are all-reduced (Megatron's g), or
// reduce-scattered to [b, s/t, out] with sequence parallelism; the bias
// [out], whole on every rank, is added after.
Tensor row_parallel_linear(Builder& b, std::string_view name, const Tensor& x, int64_t out_features,
                           bool with_bias);

// Megatron's f and g around a block whose weights are split but whose
// input is whole on every rank (a mixture of experts: its router whole, its
// experts' width split). tp_region_input takes the block's input x [b, s, h]
// as a rank holds it: without sequence parallelism it returns x and
// all-reduces x's gradient once the block's backward has made it (so it
// must be called before the block's ops, and x must feed nothing else);
// with it, all-gathers [b, s/t, h] to [b, s, h], its gradient
// reduce-scattered. tp_region_output makes the block's partial sums
// [b, s, h] whole: all-reduced, or reduce-scattered to [b, s/t, h].
Tensor tp_region_input(Builder& b, std::string_view name, const Tensor& x);
Tensor tp_region_output(Builder& b, std::string_view name, const Tensor& partial);

// Megatron's VocabParallelEmbedding: the rank's [vocab/t, h] rows, a masked
// lookup, then the partial sums all-reduced (reduce-scattered along the
// sequence with sequence parallelism).
Tensor vocab_parallel_embedding(Builder& b, std::string_view name, const Tensor& ids,
                                const Tensor& table);

// Logits [b, s, vocab/t] of the output head tied to a vocab-parallel table
// [vocab/t, h]: a column-parallel matmul (x is the final norm's output,
// [b, s/t, h] with sequence parallelism, gathered first).
Tensor vocab_parallel_logits(Builder& b, std::string_view name, const Tensor& x,
                             const Tensor& table);

// Cross-entropy of logits [N, vocab/t] as Megatron's
// _VocabParallelCrossEntropy computes it: each rank's shard of the softmax,
// and the rows' max, sum of exponentials and target logit (3 fp32 values a
// row) all-reduced over the ranks.
Tensor vocab_parallel_cross_entropy(Builder& b, std::string_view name, const Tensor& logits,
                                    const Tensor& labels);

}  // namespace memwall::models
