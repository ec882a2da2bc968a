// The AVX2+FMA+F16C kernels of the CPU optimizer step: 8 floats at a time,
// the same operations in the same order as the scalar kernels
// (cpu_optimizer.cc). A tile's last partial vector goes through the same
// code on a zero-padded copy, so every element sees the same arithmetic.
// The bf16/fp16 copy is streamed (Note [Streamed copies] in
// cpu_optimizer_kernels.h).
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu_optimizer_kernels.h"

#define MEMWALL_AVX2 __attribute__((target("avx2,fma,f16c"), always_inline))

namespace memwall::runtime::detail {
namespace {

template <bool kStream>
MEMWALL_AVX2 inline void put_halves(uint16_t* out, __m128i h) {
  if constexpr (kStream) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(out), h);
  } else {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), h);
  }
}

template <bool kStream>
MEMWALL_AVX2 inline void store_copy_avx2(uint16_t* out, __m256 p, HalfType type) {
  if (type == HalfType::fp16) {
    put_halves<kStream>(out, _mm256_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  } else if (type == HalfType::bf16) {
    // c10::BFloat16's round_to_nearest_even on 8 lanes.
    const __m256i u = _mm256_castps_si256(p);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb);
    r = _mm256_srli_epi32(r, 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(p, p, _CMP_UNORD_Q));
    r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7FC0), nan);
    const __m128i packed =
        _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    put_halves<kStream>(out, packed);
  }
}

template <bool kStream>
MEMWALL_AVX2 inline void adamw8_avx2(const AdamWScalars& s, float* param, const float* grad,
                                     float* exp_avg, float* exp_avg_sq, uint16_t* copy,
                                     HalfType type) {
  __m256 g = _mm256_loadu_ps(grad);
  if (s.maximize) g = _mm256_xor_ps(g, _mm256_set1_ps(-0.0f));
  __m256 p = _mm256_loadu_ps(param);
  if (s.apply_decay) p = _mm256_mul_ps(p, _mm256_set1_ps(s.decay));
  const __m256 m0 = _mm256_loadu_ps(exp_avg);
  const __m256 diff = _mm256_sub_ps(g, m0);
  const __m256 w = _mm256_set1_ps(s.lerp_weight);
  const __m256 m = s.lerp_small ? _mm256_fmadd_ps(w, diff, m0)
                                : _mm256_fmadd_ps(_mm256_sub_ps(w, _mm256_set1_ps(1.0f)), diff, g);
  const __m256 v0 = _mm256_mul_ps(_mm256_loadu_ps(exp_avg_sq), _mm256_set1_ps(s.beta2));
  const __m256 v = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(s.one_minus_b2), g), g, v0);
  const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(v), _mm256_set1_ps(s.bc2_sqrt)),
                                     _mm256_set1_ps(s.eps));
  const __m256 update = _mm256_div_ps(_mm256_mul_ps(_mm256_set1_ps(s.neg_step_size), m), denom);
  p = _mm256_add_ps(p, update);
  _mm256_storeu_ps(param, p);
  _mm256_storeu_ps(exp_avg, m);
  _mm256_storeu_ps(exp_avg_sq, v);
  store_copy_avx2<kStream>(copy, p, type);
}

template <bool kStream>
MEMWALL_AVX2 inline void sgd8_avx2(const SgdScalars& s, float* param, const float* grad, float* buf,
                                   uint16_t* copy, HalfType type) {
  __m256 g = _mm256_loadu_ps(grad);
  if (s.maximize) g = _mm256_xor_ps(g, _mm256_set1_ps(-0.0f));
  __m256 p = _mm256_loadu_ps(param);
  if (s.apply_decay) g = _mm256_fmadd_ps(p, _mm256_set1_ps(s.weight_decay), g);
  if (s.use_momentum) {
    const __m256 mom = _mm256_set1_ps(s.momentum);
    const __m256 b = s.first ? g
                             : _mm256_fmadd_ps(g, _mm256_set1_ps(s.one_minus_dampening),
                                               _mm256_mul_ps(_mm256_loadu_ps(buf), mom));
    _mm256_storeu_ps(buf, b);
    g = s.nesterov ? _mm256_fmadd_ps(b, mom, g) : b;
  }
  p = _mm256_fmadd_ps(g, _mm256_set1_ps(s.neg_lr), p);
  _mm256_storeu_ps(param, p);
  store_copy_avx2<kStream>(copy, p, type);
}

// Elements [i, i + count), count < 8 or a peeled head, through the vector
// code on zero-padded copies.
MEMWALL_AVX2 inline void adamw_padded_avx2(const AdamWScalars& s, const AdamWTile& t, size_t i,
                                           size_t count, HalfType copy) {
  float p[8] = {}, g[8] = {}, m[8] = {}, v[8] = {};
  uint16_t c[8] = {};
  std::memcpy(p, t.param + i, count * sizeof(float));
  std::memcpy(g, t.grad + i, count * sizeof(float));
  std::memcpy(m, t.exp_avg + i, count * sizeof(float));
  std::memcpy(v, t.exp_avg_sq + i, count * sizeof(float));
  adamw8_avx2<false>(s, p, g, m, v, c, copy);
  std::memcpy(t.param + i, p, count * sizeof(float));
  std::memcpy(t.exp_avg + i, m, count * sizeof(float));
  std::memcpy(t.exp_avg_sq + i, v, count * sizeof(float));
  if (t.copy) std::memcpy(t.copy + i, c, count * sizeof(uint16_t));
}

MEMWALL_AVX2 inline void sgd_padded_avx2(const SgdScalars& s, const SgdTile& t, size_t i,
                                         size_t count, HalfType copy) {
  float p[8] = {}, g[8] = {}, b[8] = {};
  uint16_t c[8] = {};
  std::memcpy(p, t.param + i, count * sizeof(float));
  std::memcpy(g, t.grad + i, count * sizeof(float));
  if (t.buf) std::memcpy(b, t.buf + i, count * sizeof(float));
  sgd8_avx2<false>(s, p, g, b, c, copy);
  std::memcpy(t.param + i, p, count * sizeof(float));
  if (t.buf) std::memcpy(t.buf + i, b, count * sizeof(float));
  if (t.copy) std::memcpy(t.copy + i, c, count * sizeof(uint16_t));
}

}  // namespace

// Note [Streamed copies]: a head peeled until the copy is 16-byte aligned,
// a streamed body, the tail padded, then a store fence.
__attribute__((target("avx2,fma,f16c"))) void adamw_avx2(const AdamWScalars& s, const AdamWTile& t,
                                                         HalfType copy) {
  uint16_t discard[8];
  size_t i = 0;
  const bool stream = t.copy != nullptr && copy != HalfType::none && streamable(t.copy);
  if (stream) {
    const size_t head = std::min(t.n, elements_to_alignment(t.copy, 16));
    if (head > 0) adamw_padded_avx2(s, t, 0, head, copy);
    for (i = head; i + 8 <= t.n; i += 8) {
      adamw8_avx2<true>(s, t.param + i, t.grad + i, t.exp_avg + i, t.exp_avg_sq + i, t.copy + i,
                        copy);
    }
  } else {
    for (; i + 8 <= t.n; i += 8) {
      adamw8_avx2<false>(s, t.param + i, t.grad + i, t.exp_avg + i, t.exp_avg_sq + i,
                         t.copy ? t.copy + i : discard, copy);
    }
  }
  if (i < t.n) adamw_padded_avx2(s, t, i, t.n - i, copy);
  if (stream) _mm_sfence();
}

__attribute__((target("avx2,fma,f16c"))) void sgd_avx2(const SgdScalars& s, const SgdTile& t,
                                                       HalfType copy) {
  uint16_t discard[8];
  float no_buf[8];
  size_t i = 0;
  const bool stream = t.copy != nullptr && copy != HalfType::none && streamable(t.copy);
  if (stream) {
    const size_t head = std::min(t.n, elements_to_alignment(t.copy, 16));
    if (head > 0) sgd_padded_avx2(s, t, 0, head, copy);
    for (i = head; i + 8 <= t.n; i += 8) {
      sgd8_avx2<true>(s, t.param + i, t.grad + i, t.buf ? t.buf + i : no_buf, t.copy + i, copy);
    }
  } else {
    for (; i + 8 <= t.n; i += 8) {
      sgd8_avx2<false>(s, t.param + i, t.grad + i, t.buf ? t.buf + i : no_buf,
                       t.copy ? t.copy + i : discard, copy);
    }
  }
  if (i < t.n) sgd_padded_avx2(s, t, i, t.n - i, copy);
  if (stream) _mm_sfence();
}

}  // namespace memwall::runtime::detail
#endif  // __x86_64__
