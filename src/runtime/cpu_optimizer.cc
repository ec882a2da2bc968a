// Validation, ISA dispatch, tiling over threads, and the scalar kernels of
// the CPU optimizer step (cpu_optimizer.h). The vector kernels are in
// cpu_optimizer_avx2.cc and cpu_optimizer_avx512.cc; all three compute the
// same operations in the same order, so they agree bit for bit. The build
// passes -ffp-contract=off (CMakeLists.txt): an FMA appears only where it is
// written, as in torch's kernels.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "cpu_optimizer_kernels.h"
#include "memwall/runtime/cpu_optimizer.h"

namespace memwall::runtime {
namespace {

[[noreturn]] void opt_fail(const std::string& what) {
  throw OptimizerError("cpu optimizer: " + what);
}

void require_finite(double value, const char* name) {
  if (!std::isfinite(value)) opt_fail(std::string(name) + " must be finite");
}

template <class T>
void check_buffer(std::span<T> buffer, size_t n, const char* name) {
  if (buffer.size() != n) {
    opt_fail(std::string(name) + " has " + std::to_string(buffer.size()) + " elements, param has " +
             std::to_string(n));
  }
  if (n > 0 && buffer.data() == nullptr) opt_fail(std::string(name) + " is null");
}

void check_common(int64_t step, size_t n, const HalfCopy& copy, const StepOptions& options) {
  if (step < 1) opt_fail("step must be >= 1 (it counts from 1), got " + std::to_string(step));
  if (copy.type == HalfType::none) {
    if (!copy.out.empty()) opt_fail("a copy buffer was given without a copy type");
  } else {
    check_buffer(copy.out, n, "copy");
  }
  if (options.tile == 0) opt_fail("tile must be > 0");
  if (options.isa && !isa_supported(*options.isa)) {
    opt_fail(std::string("this CPU does not support ") + isa_name(*options.isa));
  }
}

// Runs body(begin, count) over [0, n) in tiles, on up to options.threads
// threads that take tiles in turn. Elements are independent, so neither
// the tile size nor the order changes any result.
template <class Body>
void for_each_tile(size_t n, const StepOptions& options, const Body& body) {
  const size_t tiles = (n + options.tile - 1) / options.tile;
  size_t threads = options.threads != 0 ? options.threads : std::thread::hardware_concurrency();
  threads = std::clamp<size_t>(threads, 1, std::max<size_t>(tiles, 1));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t t = next.fetch_add(1); t < tiles; t = next.fetch_add(1)) {
      const size_t begin = t * options.tile;
      body(begin, std::min(options.tile, n - begin));
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  try {
    for (size_t i = 1; i < threads; ++i) pool.emplace_back(worker);
  } catch (const std::system_error&) {
    // No more threads: the ones running and this one take every tile.
  }
  worker();
  for (std::thread& th : pool) th.join();
}

void write_copy(uint16_t* out, size_t i, float value, HalfType type) {
  if (type == HalfType::bf16) {
    out[i] = float_to_bf16(value);
  } else if (type == HalfType::fp16) {
    out[i] = float_to_fp16(value);
  }
}

}  // namespace

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return "scalar";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "?";
}

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return true;
#if defined(__x86_64__)
    // __builtin_cpu_supports also checks that the OS saves the registers.
    case Isa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("f16c");
    case Isa::avx512:
      return __builtin_cpu_supports("avx512f");
#else
    default:
      return false;
#endif
  }
  return false;
}

Isa best_isa() {
  static const Isa best = isa_supported(Isa::avx512) ? Isa::avx512
                          : isa_supported(Isa::avx2) ? Isa::avx2
                                                     : Isa::scalar;
  return best;
}

// torch's c10::BFloat16: round to nearest even, NaN to 0x7FC0.
uint16_t float_to_bf16(float value) {
  const auto bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0;
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

// IEEE binary16, round to nearest even, NaN as vcvtps2ph makes it.
uint16_t float_to_fp16(float value) {
  const auto bits = std::bit_cast<uint32_t>(value);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((abs >> 13) & 0x3FFu));
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65520: inf
  if (abs >= 0x38800000u) {  // a normal half: rebias the exponent, round the mantissa
    const uint32_t rounded = abs + 0xFFFu + ((abs >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
  }
  // Subnormal or zero: units of 2^-24; the scaling is exact and nearbyint
  // rounds to even in the default rounding mode.
  const float units = std::fabs(value) * 0x1p24f;
  return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(units)));
}

namespace detail {

void adamw_scalar(const AdamWScalars& s, const AdamWTile& t, HalfType copy) {
  for (size_t i = 0; i < t.n; ++i) {
    const float g = s.maximize ? -t.grad[i] : t.grad[i];
    float p = t.param[i];
    if (s.apply_decay) p = p * s.decay;
    // ATen's lerp_vec: fma(w, end - start, start), or fma(w - 1, end - start, end).
    const float m0 = t.exp_avg[i];
    const float m = s.lerp_small ? std::fma(s.lerp_weight, g - m0, m0)
                                 : std::fma(s.lerp_weight - 1.0f, g - m0, g);
    // mul_(beta2) then addcmul_: self + value * t1 * t2, contracted to an FMA.
    const float v = std::fma(s.one_minus_b2 * g, g, t.exp_avg_sq[i] * s.beta2);
    const float denom = std::sqrt(v) / s.bc2_sqrt + s.eps;
    p = p + (s.neg_step_size * m) / denom;  // addcdiv_
    t.param[i] = p;
    t.exp_avg[i] = m;
    t.exp_avg_sq[i] = v;
    write_copy(t.copy, i, p, copy);
  }
}

void sgd_scalar(const SgdScalars& s, const SgdTile& t, HalfType copy) {
  for (size_t i = 0; i < t.n; ++i) {
    float g = s.maximize ? -t.grad[i] : t.grad[i];
    float p = t.param[i];
    // ATen's add with alpha is fmadd(other, alpha, self).
    if (s.apply_decay) g = std::fma(p, s.weight_decay, g);
    if (s.use_momentum) {
      const float b = s.first ? g : std::fma(g, s.one_minus_dampening, t.buf[i] * s.momentum);
      t.buf[i] = b;
      g = s.nesterov ? std::fma(b, s.momentum, g) : b;
    }
    p = std::fma(g, s.neg_lr, p);
    t.param[i] = p;
    write_copy(t.copy, i, p, copy);
  }
}

}  // namespace detail

void adamw_step(const AdamWConfig& c, int64_t step, const AdamWState& state, const HalfCopy& copy,
                const StepOptions& options) {
  const size_t n = state.param.size();
  check_buffer(state.param, n, "param");
  check_buffer(state.grad, n, "grad");
  check_buffer(state.exp_avg, n, "exp_avg");
  check_buffer(state.exp_avg_sq, n, "exp_avg_sq");
  check_common(step, n, copy, options);
  for (auto [value, name] : {std::pair{c.lr, "lr"},
                             {c.beta1, "beta1"},
                             {c.beta2, "beta2"},
                             {c.eps, "eps"},
                             {c.weight_decay, "weight_decay"}}) {
    require_finite(value, name);
  }
  // torch.optim.AdamW's own checks.
  if (c.lr < 0) opt_fail("lr must be >= 0");
  if (c.eps < 0) opt_fail("eps must be >= 0");
  if (c.beta1 < 0 || c.beta1 >= 1) opt_fail("beta1 must be in [0, 1)");
  if (c.beta2 < 0 || c.beta2 >= 1) opt_fail("beta2 must be in [0, 1)");
  if (c.weight_decay < 0) opt_fail("weight_decay must be >= 0");

  // Python computes these in double; ATen casts each scalar argument to the
  // tensor's type, float.
  const auto steps = static_cast<double>(step);
  const double step_size = c.lr / (1.0 - std::pow(c.beta1, steps));
  const float weight = static_cast<float>(1.0 - c.beta1);
  const detail::AdamWScalars s{
      .decay = static_cast<float>(1.0 - c.lr * c.weight_decay),
      .apply_decay = c.weight_decay != 0,
      .lerp_weight = weight,
      .lerp_small = std::fabs(weight) < 0.5f,
      .beta2 = static_cast<float>(c.beta2),
      .one_minus_b2 = static_cast<float>(1.0 - c.beta2),
      // Python: bias_correction2**0.5, a pow, not a sqrt.
      .bc2_sqrt = static_cast<float>(std::pow(1.0 - std::pow(c.beta2, steps), 0.5)),
      .eps = static_cast<float>(c.eps),
      .neg_step_size = static_cast<float>(-step_size),
      .maximize = c.maximize,
  };
  auto kernel = &detail::adamw_scalar;
#if defined(__x86_64__)
  const Isa isa = options.isa.value_or(best_isa());
  if (isa == Isa::avx2) kernel = &detail::adamw_avx2;
  if (isa == Isa::avx512) kernel = &detail::adamw_avx512;
#endif
  for_each_tile(n, options, [&](size_t begin, size_t count) {
    const detail::AdamWTile tile{state.param.data() + begin,
                                 state.grad.data() + begin,
                                 state.exp_avg.data() + begin,
                                 state.exp_avg_sq.data() + begin,
                                 copy.type == HalfType::none ? nullptr : copy.out.data() + begin,
                                 count};
    kernel(s, tile, copy.type);
  });
}

void sgd_step(const SgdConfig& c, int64_t step, const SgdState& state, const HalfCopy& copy,
              const StepOptions& options) {
  const size_t n = state.param.size();
  check_buffer(state.param, n, "param");
  check_buffer(state.grad, n, "grad");
  check_buffer(state.momentum_buffer, c.momentum != 0 ? n : 0, "momentum_buffer");
  check_common(step, n, copy, options);
  for (auto [value, name] : {std::pair{c.lr, "lr"},
                             {c.momentum, "momentum"},
                             {c.dampening, "dampening"},
                             {c.weight_decay, "weight_decay"}}) {
    require_finite(value, name);
  }
  // torch.optim.SGD's own checks.
  if (c.lr < 0) opt_fail("lr must be >= 0");
  if (c.momentum < 0) opt_fail("momentum must be >= 0");
  if (c.weight_decay < 0) opt_fail("weight_decay must be >= 0");
  if (c.nesterov && (c.momentum <= 0 || c.dampening != 0)) {
    opt_fail("nesterov needs momentum > 0 and dampening 0");
  }

  const detail::SgdScalars s{
      .weight_decay = static_cast<float>(c.weight_decay),
      .apply_decay = c.weight_decay != 0,
      .momentum = static_cast<float>(c.momentum),
      .one_minus_dampening = static_cast<float>(1.0 - c.dampening),
      .use_momentum = c.momentum != 0,
      .first = step == 1,
      .nesterov = c.nesterov,
      .neg_lr = static_cast<float>(-c.lr),
      .maximize = c.maximize,
  };
  auto kernel = &detail::sgd_scalar;
#if defined(__x86_64__)
  const Isa isa = options.isa.value_or(best_isa());
  if (isa == Isa::avx2) kernel = &detail::sgd_avx2;
  if (isa == Isa::avx512) kernel = &detail::sgd_avx512;
#endif
  for_each_tile(n, options, [&](size_t begin, size_t count) {
    const detail::SgdTile tile{state.param.data() + begin, state.grad.data() + begin,
                               s.use_momentum ? state.momentum_buffer.data() + begin : nullptr,
                               copy.type == HalfType::none ? nullptr : copy.out.data() + begin,
                               count};
    kernel(s, tile, copy.type);
  });
}

}  // namespace memwall::runtime
