// Context parallelism in the zoo (Note [Context parallelism in the zoo] in
// context_parallel.cc): each of ModelOptions::context_parallel ranks holds
// the sequence's positions in two load-balanced chunks, and attention
// passes the keys and values around the ranks in a ring.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "attention.h"
#include "attention_parts.h"
#include "builder.h"

namespace memwall::models {

// The context-parallel ranks c (1: none).
int64_t cp_ranks(const Builder& b);

// The positions a rank holds, seq / c; checked to split into 2c equal
// chunks (two a rank: one from each end, which balances causal attention).
int64_t cp_local_seq(const Builder& b, int64_t seq);

// Flash attention of the rank's queries q [b, heads, s/c, d] over every
// rank's keys and values (k, v [b, kv_heads, s/c, d] the rank's own) by
// TransformerEngine's ring of point-to-point exchanges: comm ops of type
// cp_send_recv beside c blockwise kernels, forward and backward. Returns
// the context [b, s/c, heads * d]; q, k and v's gradients go to `sink`.
Tensor ring_flash_attention(Builder& b, const std::string& fq, const Tensor& q, const Tensor& k,
                            const Tensor& v, const AttentionOptions& o,
                            const std::shared_ptr<attention_parts::QkvGradients>& sink);

}  // namespace memwall::models
