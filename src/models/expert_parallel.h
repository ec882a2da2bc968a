// Expert parallelism in the zoo (Note [Expert parallelism in the zoo] in
// expert_parallel.cc): a mixture-of-experts layer whose experts are spread
// over ModelOptions::expert_parallel data-parallel ranks, its tokens sent to
// them and back by all-to-all comm ops (type ep_all_to_all).
#pragma once

#include <cstdint>
#include <vector>

#include "builder.h"

namespace memwall::models {

// The expert-parallel ranks e (1: none).
int64_t ep_ranks(const Builder& b);

// Dispatch: the rank's tokens x [n, h] copied out once per routing choice
// (indices [n, k]) in expert order, then an all-to-all; returns each local
// expert's tokens from every rank, [per_expert, h] each. The gradients come
// back by the reverse all-to-all and are scattered into x's.
std::vector<Tensor> ep_dispatch(Builder& b, const Tensor& x, const Tensor& indices,
                                int64_t local_experts, int64_t per_expert);

// Combine: the local experts' outputs sent home by all-to-all ([n k, h]),
// then weighted by the routing weights [n, k] and summed into each token's
// row (index_add): [n, h].
Tensor ep_combine(Builder& b, const std::vector<Tensor>& outputs, const Tensor& weights,
                  const Tensor& indices, int64_t tokens);

}  // namespace memwall::models
