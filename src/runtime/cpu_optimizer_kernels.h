// The per-ISA kernels behind cpu_optimizer.h: each processes one tile with
// the hyperparameters already cast to float as torch casts them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "memwall/runtime/cpu_optimizer.h"

namespace memwall::runtime::detail {

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
