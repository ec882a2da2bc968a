// The AVX-512F kernels of the CPU optimizer step: 16 floats at a time, the
// same operations in the same order as the scalar kernels
// (cpu_optimizer.cc). A tile's last partial vector goes through the same
// code on a zero-padded copy, so every element sees the same arithmetic.
// The bf16/fp16 copy is streamed (Note [Streamed copies] in
// cpu_optimizer_kernels.h).
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu_optimizer_kernels.h"

#define MEMWALL_AVX512 __attribute__((target("avx512f,fma,f16c"), always_inline))

namespace memwall::runtime::detail {
namespace {

// All lanes. The zero-masked forms of the intrinsics compute the same as the
// plain ones, which GCC 12 reports as using an uninitialized value
// (-Wmaybe-uninitialized on its _mm512_undefined_* sources).
constexpr __mmask16 kAll = 0xFFFF;

template <bool kStream>
MEMWALL_AVX512 inline void put_halves(uint16_t* out, __m256i h) {
  if constexpr (kStream) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(out), h);
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), h);
  }
}

template <bool kStream>
MEMWALL_AVX512 inline void store_copy_avx512(uint16_t* out, __m512 p, HalfType type) {
  if (type == HalfType::fp16) {
    put_halves<kStream>(
        out, _mm512_maskz_cvtps_ph(kAll, p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  } else if (type == HalfType::bf16) {
    // c10::BFloat16's round_to_nearest_even on 16 lanes.
    const __m512i u = _mm512_castps_si512(p);
    const __m512i lsb =
        _mm512_and_si512(_mm512_maskz_srli_epi32(kAll, u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb);
    r = _mm512_maskz_srli_epi32(kAll, r, 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(p, p, _CMP_UNORD_Q);
    r = _mm512_mask_blend_epi32(nan, r, _mm512_set1_epi32(0x7FC0));
    put_halves<kStream>(out, _mm512_maskz_cvtepi32_epi16(kAll, r));
  }
}

template <bool kStream>
MEMWALL_AVX512 inline void adamw16_avx512(const AdamWScalars& s, float* param, const float* grad,
                                          float* exp_avg, float* exp_avg_sq, uint16_t* copy,
                                          HalfType type) {
  __m512 g = _mm512_loadu_ps(grad);
  if (s.maximize) {
    g = _mm512_castsi512_ps(
        _mm512_xor_si512(_mm512_castps_si512(g), _mm512_set1_epi32(int(0x80000000u))));
  }
  __m512 p = _mm512_loadu_ps(param);
  if (s.apply_decay) p = _mm512_mul_ps(p, _mm512_set1_ps(s.decay));
  const __m512 m0 = _mm512_loadu_ps(exp_avg);
  const __m512 diff = _mm512_sub_ps(g, m0);
  const __m512 w = _mm512_set1_ps(s.lerp_weight);
  const __m512 m = s.lerp_small ? _mm512_fmadd_ps(w, diff, m0)
                                : _mm512_fmadd_ps(_mm512_sub_ps(w, _mm512_set1_ps(1.0f)), diff, g);
  const __m512 v0 = _mm512_mul_ps(_mm512_loadu_ps(exp_avg_sq), _mm512_set1_ps(s.beta2));
  const __m512 v = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(s.one_minus_b2), g), g, v0);
  const __m512 denom =
      _mm512_add_ps(_mm512_div_ps(_mm512_maskz_sqrt_ps(kAll, v), _mm512_set1_ps(s.bc2_sqrt)),
                    _mm512_set1_ps(s.eps));
  const __m512 update = _mm512_div_ps(_mm512_mul_ps(_mm512_set1_ps(s.neg_step_size), m), denom);
  p = _mm512_add_ps(p, update);
  _mm512_storeu_ps(param, p);
  _mm512_storeu_ps(exp_avg, m);
  _mm512_storeu_ps(exp_avg_sq, v);
  store_copy_avx512<kStream>(copy, p, type);
}

template <bool kStream>
MEMWALL_AVX512 inline void sgd16_avx512(const SgdScalars& s, float* param, const float* grad,
                                        float* buf, uint16_t* copy, HalfType type) {
  __m512 g = _mm512_loadu_ps(grad);
  if (s.maximize) {
    g = _mm512_castsi512_ps(
        _mm512_xor_si512(_mm512_castps_si512(g), _mm512_set1_epi32(int(0x80000000u))));
  }
  __m512 p = _mm512_loadu_ps(param);
  if (s.apply_decay) g = _mm512_fmadd_ps(p, _mm512_set1_ps(s.weight_decay), g);
  if (s.use_momentum) {
    const __m512 mom = _mm512_set1_ps(s.momentum);
    const __m512 b = s.first ? g
                             : _mm512_fmadd_ps(g, _mm512_set1_ps(s.one_minus_dampening),
                                               _mm512_mul_ps(_mm512_loadu_ps(buf), mom));
    _mm512_storeu_ps(buf, b);
    g = s.nesterov ? _mm512_fmadd_ps(b, mom, g) : b;
  }
  p = _mm512_fmadd_ps(g, _mm512_set1_ps(s.neg_lr), p);
  _mm512_storeu_ps(param, p);
  store_copy_avx512<kStream>(copy, p, type);
}

// Elements [i, i + count), count < 16 or a peeled head, through the vector
// code on zero-padded copies.
MEMWALL_AVX512 inline void adamw_padded_avx512(const AdamWScalars& s, const AdamWTile& t, size_t i,
                                               size_t count, HalfType copy) {
  float p[16] = {}, g[16] = {}, m[16] = {}, v[16] = {};
  uint16_t c[16] = {};
  std::memcpy(p, t.param + i, count * sizeof(float));
  std::memcpy(g, t.grad + i, count * sizeof(float));
  std::memcpy(m, t.exp_avg + i, count * sizeof(float));
  std::memcpy(v, t.exp_avg_sq + i, count * sizeof(float));
  adamw16_avx512<false>(s, p, g, m, v, c, copy);
  std::memcpy(t.param + i, p, count * sizeof(float));
  std::memcpy(t.exp_avg + i, m, count * sizeof(float));
  std::memcpy(t.exp_avg_sq + i, v, count * sizeof(float));
  if (t.copy) std::memcpy(t.copy + i, c, count * sizeof(uint16_t));
}

MEMWALL_AVX512 inline void sgd_padded_avx512(const SgdScalars& s, const SgdTile& t, size_t i,
                                             size_t count, HalfType copy) {
  float p[16] = {}, g[16] = {}, b[16] = {};
  uint16_t c[16] = {};
  std::memcpy(p, t.param + i, count * sizeof(float));
  std::memcpy(g, t.grad + i, count * sizeof(float));
  if (t.buf) std::memcpy(b, t.buf + i, count * sizeof(float));
  sgd16_avx512<false>(s, p, g, b, c, copy);
  std::memcpy(t.param + i, p, count * sizeof(float));
  if (t.buf) std::memcpy(t.buf + i, b, count * sizeof(float));
  if (t.copy) std::memcpy(t.copy + i, c, count * sizeof(uint16_t));
}

}  // namespace

// Note [Streamed copies]: a head peeled until the copy is 32-byte aligned,
// a streamed body, the tail padded, then a store fence.
__attribute__((target("avx512f,fma,f16c"))) void adamw_avx512(const AdamWScalars& s,
                                                              const AdamWTile& t, HalfType copy) {
  uint16_t discard[16];
  size_t i = 0;
  const bool stream = t.copy != nullptr && copy != HalfType::none && streamable(t.copy);
  if (stream) {
    const size_t head = std::min(t.n, elements_to_alignment(t.copy, 32));
    if (head > 0) adamw_padded_avx512(s, t, 0, head, copy);
    for (i = head; i + 16 <= t.n; i += 16) {
      adamw16_avx512<true>(s, t.param + i, t.grad + i, t.exp_avg + i, t.exp_avg_sq + i, t.copy + i,
                           copy);
    }
  } else {
    for (; i + 16 <= t.n; i += 16) {
      adamw16_avx512<false>(s, t.param + i, t.grad + i, t.exp_avg + i, t.exp_avg_sq + i,
                            t.copy ? t.copy + i : discard, copy);
    }
  }
  if (i < t.n) adamw_padded_avx512(s, t, i, t.n - i, copy);
  if (stream) _mm_sfence();
}

__attribute__((target("avx512f,fma,f16c"))) void sgd_avx512(const SgdScalars& s, const SgdTile& t,
                                                            HalfType copy) {
  uint16_t discard[16];
  float no_buf[16];
  size_t i = 0;
  const bool stream = t.copy != nullptr && copy != HalfType::none && streamable(t.copy);
  if (stream) {
    const size_t head = std::min(t.n, elements_to_alignment(t.copy, 32));
    if (head > 0) sgd_padded_avx512(s, t, 0, head, copy);
    for (i = head; i + 16 <= t.n; i += 16) {
      sgd16_avx512<true>(s, t.param + i, t.grad + i, t.buf ? t.buf + i : no_buf, t.copy + i, copy);
    }
  } else {
    for (; i + 16 <= t.n; i += 16) {
      sgd16_avx512<false>(s, t.param + i, t.grad + i, t.buf ? t.buf + i : no_buf,
                          t.copy ? t.copy + i : discard, copy);
    }
  }
  if (i < t.n) sgd_padded_avx512(s, t, i, t.n - i, copy);
  if (stream) _mm_sfence();
}

}  // namespace memwall::runtime::detail
#endif  // __x86_64__
