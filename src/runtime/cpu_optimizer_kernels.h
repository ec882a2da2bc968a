// The per-ISA kernels behind cpu_optimizer.h: each processes one tile with
// the hyperparameters already cast to float as torch casts them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "memwall/runtime/cpu_optimizer.h"

namespace memwall::runtime::detail {

// Note [Streamed copies]
// ~~~~~~~~~~~~~~~~~~~~~~
// The bf16/fp16 copy is written and not read again by the step (the copy
// engine or the device reads it later), so the vector kernels write it with
// non-temporal stores: no read-for-ownership of its cache lines (an
// ordinary store reads each line before writing it, 2 more bytes per
// parameter on AdamW's 30) and no eviction of the lines the step streams.
// A streaming store needs an aligned address, so a tile's head is peeled
// (through the padded path, like the tail: the same arithmetic, so the bits
// do not depend on alignment) until the copy is aligned; a copy at an odd
// address is written with ordinary stores. Streaming stores are weakly
// ordered: the tile ends with a store fence, so that whoever learns the
// tile is done (a thread join, the copy engine's queue) sees the copy.
inline bool streamable(const uint16_t* copy) {
  return reinterpret_cast<uintptr_t>(copy) % sizeof(uint16_t) == 0;
}
// Elements before `copy` reaches a multiple of `bytes`.
inline size_t elements_to_alignment(const uint16_t* copy, size_t bytes) {
  const size_t misalignment = reinterpret_cast<uintptr_t>(copy) % bytes;
  return misalignment == 0 ? 0 : (bytes - misalignment) / sizeof(uint16_t);
}

// torch's scalars, in the types its kernels see them (docs/runtime.md).
struct AdamWScalars {
  float decay;          // float(1 - lr * weight_decay); param.mul_
  bool apply_decay;     // weight_decay != 0
  float lerp_weight;    // float(1 - beta1); exp_avg.lerp_
  bool lerp_small;      // |lerp_weight| < 0.5: ATen's lerp_vec branch
  float beta2;          // exp_avg_sq.mul_(beta2)
  float one_minus_b2;   // addcmul_ value
  float bc2_sqrt;       // float(sqrt(1 - beta2**step))
  float eps;            // add_(eps)
  float neg_step_size;  // addcdiv_ value: float(-lr / (1 - beta1**step))
  bool maximize;
};

struct AdamWTile {
  float* param;
  const float* grad;
  float* exp_avg;
  float* exp_avg_sq;
  uint16_t* copy;  // null: none
  size_t n;
};

struct SgdScalars {
  float weight_decay;  // grad.add(param, alpha=weight_decay)
  bool apply_decay;
  float momentum;  // buf.mul_(momentum)
  float one_minus_dampening;
  bool use_momentum;
  bool first;  // step 1: buf = grad
  bool nesterov;
  float neg_lr;  // param.add_(grad, alpha=-lr)
  bool maximize;
};

struct SgdTile {
  float* param;
  const float* grad;
  float* buf;  // null without momentum
  uint16_t* copy;
  size_t n;
};

void adamw_scalar(const AdamWScalars& s, const AdamWTile& t, HalfType copy);
void sgd_scalar(const SgdScalars& s, const SgdTile& t, HalfType copy);
#if defined(__x86_64__)
void adamw_avx2(const AdamWScalars& s, const AdamWTile& t, HalfType copy);
void sgd_avx2(const SgdScalars& s, const SgdTile& t, HalfType copy);
void adamw_avx512(const AdamWScalars& s, const AdamWTile& t, HalfType copy);
void sgd_avx512(const SgdScalars& s, const SgdTile& t, HalfType copy);
#endif

}  // namespace memwall::runtime::detail
