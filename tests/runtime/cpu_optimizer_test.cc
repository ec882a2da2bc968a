// The CPU optimizer step (cpu_optimizer.h): the ISAs agree bit for bit,
// threads and tiles change nothing, the bf16/fp16 copies round to nearest
// even, bad arguments throw, and the results are torch's. Golden values come
// from torch.optim.AdamW / torch.optim.SGD (foreach=False) themselves, run
// by tests/python/cpu_adam_golden.py under memwall's Python environment
// (scripts/install-deps.sh --print-python, or $MEMWALL_PYTHON).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "memwall/runtime/cpu_optimizer.h"

namespace memwall::runtime {
namespace {

using Floats = std::vector<float>;
using Halfs = std::vector<uint16_t>;

Floats random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  Floats out(n);
  for (float& x : out) x = dist(gen);
  return out;
}

// Bit patterns, so that -0 and NaNs compare as what they are.
std::vector<uint32_t> bits(const Floats& v) {
  std::vector<uint32_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = std::bit_cast<uint32_t>(v[i]);
  return out;
}

struct AdamWRun {
  Floats param, exp_avg, exp_avg_sq;
  Halfs copy;
};

AdamWRun run_adamw(const AdamWConfig& config, size_t n, HalfType type, const StepOptions& options,
                   int steps = 3) {
  AdamWRun r{random_floats(n, 1), Floats(n, 0.0f), Floats(n, 0.0f), Halfs(n)};
  for (int step = 1; step <= steps; ++step) {
    const Floats grad = random_floats(n, 100 + step, 0.1f);
    adamw_step(config, step, {r.param, grad, r.exp_avg, r.exp_avg_sq},
               {type, type == HalfType::none ? std::span<uint16_t>{} : r.copy}, options);
  }
  return r;
}

struct SgdRun {
  Floats param, buf;
  Halfs copy;
};

SgdRun run_sgd(const SgdConfig& config, size_t n, HalfType type, const StepOptions& options,
               int steps = 3) {
  SgdRun r{random_floats(n, 2), Floats(config.momentum != 0 ? n : 0, 0.0f), Halfs(n)};
  for (int step = 1; step <= steps; ++step) {
    const Floats grad = random_floats(n, 200 + step, 0.1f);
    sgd_step(config, step, {r.param, grad, r.buf},
             {type, type == HalfType::none ? std::span<uint16_t>{} : r.copy}, options);
  }
  return r;
}

const std::vector<AdamWConfig> kAdamWConfigs = {
    {},
    {.lr = 3e-2, .beta1 = 0.3, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0, .maximize = true},
};

const std::vector<SgdConfig> kSgdConfigs = {
    {.lr = 1e-2, .momentum = 0.9, .dampening = 0.1, .weight_decay = 1e-2},
    {.lr = 5e-2, .momentum = 0.9, .weight_decay = 1e-3, .nesterov = true},
    {.lr = 1e-1, .maximize = true},
};

const std::vector<size_t> kSizes = {0, 1, 7, 8, 15, 16, 17, 31, 33, 1000, 65537};

void expect_isa_matches_scalar(Isa isa) {
  if (!isa_supported(isa)) GTEST_SKIP() << "this CPU lacks " << isa_name(isa);
  for (HalfType type : {HalfType::none, HalfType::bf16, HalfType::fp16}) {
    for (size_t n : kSizes) {
      for (const AdamWConfig& c : kAdamWConfigs) {
        const AdamWRun want = run_adamw(c, n, type, {.isa = Isa::scalar, .threads = 1});
        const AdamWRun got = run_adamw(c, n, type, {.isa = isa, .threads = 1});
        EXPECT_EQ(bits(got.param), bits(want.param)) << "n=" << n;
        EXPECT_EQ(bits(got.exp_avg), bits(want.exp_avg)) << "n=" << n;
        EXPECT_EQ(bits(got.exp_avg_sq), bits(want.exp_avg_sq)) << "n=" << n;
        EXPECT_EQ(got.copy, want.copy) << "n=" << n;
      }
      for (const SgdConfig& c : kSgdConfigs) {
        const SgdRun want = run_sgd(c, n, type, {.isa = Isa::scalar, .threads = 1});
        const SgdRun got = run_sgd(c, n, type, {.isa = isa, .threads = 1});
        EXPECT_EQ(bits(got.param), bits(want.param)) << "n=" << n;
        EXPECT_EQ(bits(got.buf), bits(want.buf)) << "n=" << n;
        EXPECT_EQ(got.copy, want.copy) << "n=" << n;
      }
    }
  }
}

TEST(CpuOptimizer, Avx2MatchesScalarBitwise) { expect_isa_matches_scalar(Isa::avx2); }
TEST(CpuOptimizer, Avx512MatchesScalarBitwise) { expect_isa_matches_scalar(Isa::avx512); }

// Note [Streamed copies]: the copy is written with streaming stores from its
// first aligned element on; the head before it goes through the padded
// path. Whatever the copy's address (every even offset within 32 bytes) and
// the tiles' (tile 1000: each tile starts 2000 bytes further), every
// element comes out as the scalar kernel computes it.
TEST(CpuOptimizer, CopyAtAnyAlignmentIsTheSame) {
  for (Isa isa : {Isa::avx2, Isa::avx512}) {
    if (!isa_supported(isa)) continue;
    for (HalfType type : {HalfType::bf16, HalfType::fp16}) {
      for (size_t n : {size_t{5}, size_t{77}, size_t{3001}}) {
        const Floats grad = random_floats(n, 7, 0.1f);
        for (size_t offset = 0; offset < 16; ++offset) {
          Floats p1 = random_floats(n, 8), m1(n, 0.0f), v1(n, 0.0f);
          Floats p2 = p1, m2 = m1, v2 = v1;
          Halfs want(n), backing(n + 16);
          const std::span<uint16_t> got(backing.data() + offset, n);
          adamw_step({}, 1, {p1, grad, m1, v1}, {type, want}, {.isa = Isa::scalar, .threads = 1});
          adamw_step({}, 1, {p2, grad, m2, v2}, {type, got},
                     {.isa = isa, .threads = 2, .tile = 1000});
          EXPECT_EQ(Halfs(got.begin(), got.end()), want)
              << isa_name(isa) << " n=" << n << " offset=" << offset;
          EXPECT_EQ(bits(p2), bits(p1)) << isa_name(isa) << " n=" << n << " offset=" << offset;
          Floats s1 = random_floats(n, 9), s2 = s1, b1(n, 0.0f), b2(n, 0.0f);
          sgd_step(kSgdConfigs[0], 1, {s1, grad, b1}, {type, want},
                   {.isa = Isa::scalar, .threads = 1});
          sgd_step(kSgdConfigs[0], 1, {s2, grad, b2}, {type, got},
                   {.isa = isa, .threads = 2, .tile = 1000});
          EXPECT_EQ(Halfs(got.begin(), got.end()), want)
              << "sgd " << isa_name(isa) << " n=" << n << " offset=" << offset;
        }
      }
    }
  }
}

TEST(CpuOptimizer, BestIsaIsSupported) {
  EXPECT_TRUE(isa_supported(best_isa())) << isa_name(best_isa());
  EXPECT_TRUE(isa_supported(Isa::scalar));
}

TEST(CpuOptimizer, ThreadsAndTilesChangeNothing) {
  const size_t n = 300001;
  const AdamWRun want = run_adamw({}, n, HalfType::bf16, {.threads = 1});
  for (StepOptions o : {StepOptions{.threads = 4, .tile = 4096}, StepOptions{.threads = 0},
                        StepOptions{.threads = 3, .tile = 1000}}) {
    const AdamWRun got = run_adamw({}, n, HalfType::bf16, o);
    EXPECT_EQ(bits(got.param), bits(want.param));
    EXPECT_EQ(bits(got.exp_avg_sq), bits(want.exp_avg_sq));
    EXPECT_EQ(got.copy, want.copy);
  }
  const SgdRun sgd_want = run_sgd(kSgdConfigs[1], n, HalfType::fp16, {.threads = 1});
  const SgdRun sgd_got = run_sgd(kSgdConfigs[1], n, HalfType::fp16, {.threads = 4, .tile = 777});
  EXPECT_EQ(bits(sgd_got.param), bits(sgd_want.param));
  EXPECT_EQ(bits(sgd_got.buf), bits(sgd_want.buf));
  EXPECT_EQ(sgd_got.copy, sgd_want.copy);
}

// Reference roundings written differently from the library's: bf16 picks
// the nearer of the two neighbours in double (ties to the even one); fp16
// is GCC's _Float16 conversion (libgcc's, IEEE round to nearest even).
uint16_t reference_bf16(float value) {
  if (std::isnan(value)) return 0x7FC0;
  const uint32_t b = std::bit_cast<uint32_t>(value);
  const uint32_t lo = b & 0xFFFF0000u;
  if (lo == b) return static_cast<uint16_t>(b >> 16);
  const uint32_t hi = lo + 0x10000u;  // next bf16 away from zero
  // Past the largest finite bf16 the neighbour is 2^128 (IEEE rounds as if
  // the exponent were unbounded, then overflows to inf).
  const bool past_max = (hi & 0x7FFFFFFFu) == 0x7F800000u;
  const double x = std::fabs(double(value));
  const double dlo = x - std::fabs(double(std::bit_cast<float>(lo)));
  const double dhi =
      (past_max ? std::ldexp(1.0, 128) : std::fabs(double(std::bit_cast<float>(hi)))) - x;
  if (dlo < dhi || (dlo == dhi && ((lo >> 16) & 1u) == 0)) return static_cast<uint16_t>(lo >> 16);
  return static_cast<uint16_t>(hi >> 16);
}

uint16_t reference_fp16(float value) {
  return std::bit_cast<uint16_t>(static_cast<_Float16>(value));
}

TEST(CpuOptimizer, CopiesRoundToNearestEven) {
  std::vector<float> values = {0.0f,
                               -0.0f,
                               1.0f,
                               -1.0f,
                               65504.0f,
                               65519.0f,
                               65520.0f,
                               1e10f,
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               0x1p-24f,
                               0x1p-25f,
                               0x1.8p-25f,
                               0x1p-14f,
                               0x1.ffcp-15f,
                               1e-30f,
                               std::numeric_limits<float>::denorm_min(),
                               std::bit_cast<float>(0x3F808000u),  // bf16 tie, even below
                               std::bit_cast<float>(0x3F818000u),  // bf16 tie, even above
                               std::bit_cast<float>(0x7F7FFFFFu)};
  std::mt19937 gen(7);
  for (int i = 0; i < 1 << 20; ++i) values.push_back(std::bit_cast<float>(uint32_t(gen())));
  for (float v : values) {
    ASSERT_EQ(float_to_bf16(v), reference_bf16(v)) << std::hexfloat << v;
    if (!std::isnan(v)) {
      ASSERT_EQ(float_to_fp16(v), reference_fp16(v)) << std::hexfloat << v;
    }
  }
  // NaN in fp16 as vcvtps2ph makes it: quiet, sign and top payload kept.
  EXPECT_EQ(float_to_fp16(std::bit_cast<float>(0xFFC00001u)), 0xFE00);
  EXPECT_EQ(float_to_fp16(std::bit_cast<float>(0x7F812345u)), 0x7E00 | (0x012345u >> 13));

  // The copies a step writes are these roundings of the updated weights, on
  // every ISA, specials included (an SGD step with lr 0 keeps them).
  Floats param = values;
  const Floats grad(values.size(), 0.0f);
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (!isa_supported(isa)) continue;
    for (HalfType type : {HalfType::bf16, HalfType::fp16}) {
      Halfs copy(values.size());
      sgd_step({.lr = 0}, 1, {param, grad, {}}, {type, copy}, {.isa = isa});
      for (size_t i = 0; i < values.size(); ++i) {
        const uint16_t want =
            type == HalfType::bf16 ? float_to_bf16(values[i]) : float_to_fp16(values[i]);
        ASSERT_EQ(copy[i], want) << isa_name(isa) << " " << std::hexfloat << values[i];
      }
    }
  }
}

std::string python_interpreter() {
  if (const char* chosen = std::getenv("MEMWALL_PYTHON"); chosen && *chosen) return chosen;
  const std::string command =
      "bash '" + std::string(MEMWALL_SOURCE_DIR) + "/scripts/install-deps.sh' --print-python";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return {};
  std::string out;
  char chunk[512];
  while (fgets(chunk, sizeof chunk, pipe)) out += chunk;
  pclose(pipe);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

// Runs the golden script; empty with `why` set when torch is not there.
nlohmann::json torch_golden(int seed, std::string& why) {
  const std::string python = python_interpreter();
  if (python.empty() || std::system(("test -x '" + python + "'").c_str()) != 0) {
    why = "no Python interpreter at '" + python + "' (set MEMWALL_PYTHON)";
    return {};
  }
  const std::string command = "'" + python + "' '" + MEMWALL_SOURCE_DIR +
                              "/tests/python/cpu_adam_golden.py' " + std::to_string(seed);
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) {
    why = "cannot run " + command;
    return {};
  }
  std::string out;
  char chunk[65536];
  size_t got;
  while ((got = fread(chunk, 1, sizeof chunk, pipe)) > 0) out.append(chunk, got);
  const int status = pclose(pipe);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
    why = python + " cannot import torch and numpy";
    return {};
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    ADD_FAILURE() << command << " failed with status " << status;
    return {};
  }
  return nlohmann::json::parse(out);
}

Floats floats_of(const nlohmann::json& j) {
  Floats out;
  for (const auto& b : j) out.push_back(std::bit_cast<float>(b.get<uint32_t>()));
  return out;
}

// Whether a and b are within one ulp of max(|b|, 1): MKL's sqrt moves a
// step's update by its last bit, which near zero is many ulps of the weight
// but never more than 2^-23 absolute (docs/runtime.md).
bool within_last_bit_of_update(const Floats& a, const Floats& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    const double bound = std::ldexp(std::max(std::fabs(double(b[i])), 1.0), -23);
    if (std::fabs(double(a[i]) - double(b[i])) > bound) return false;
  }
  return true;
}

TEST(CpuOptimizer, MatchesTorch) {
  std::string why;
  const nlohmann::json golden = torch_golden(1234, why);
  if (golden.is_null()) {
    if (!why.empty()) GTEST_SKIP() << why;
    return;
  }
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512}) {
    if (!isa_supported(isa)) continue;
    for (const auto& c : golden["cases"]) {
      const auto& cfg = c["config"];
      const std::string label =
          std::string(isa_name(isa)) + " " + c["optimizer"].dump() + " " + cfg.dump();
      Floats param = floats_of(c["param0"]);
      const size_t n = param.size();
      Halfs bf16(n), fp16(n);
      if (c["optimizer"] == "adamw") {
        const AdamWConfig config{.lr = cfg["lr"],
                                 .beta1 = cfg["betas"][0],
                                 .beta2 = cfg["betas"][1],
                                 .eps = cfg["eps"],
                                 .weight_decay = cfg["weight_decay"],
                                 .maximize = cfg["maximize"]};
        Floats m(n, 0.0f), v(n, 0.0f);
        int64_t step = 0;
        for (const auto& g : c["grads"]) {
          const Floats grad = floats_of(g);
          adamw_step(config, ++step, {param, grad, m, v}, {}, {.isa = isa});
        }
        // Bit for bit with torch's own ops around a correctly rounded sqrt.
        const auto& exact = c["exact_sqrt"];
        EXPECT_EQ(bits(param), bits(floats_of(exact["param"]))) << label;
        EXPECT_EQ(bits(m), bits(floats_of(exact["exp_avg"]))) << label;
        EXPECT_EQ(bits(v), bits(floats_of(exact["exp_avg_sq"]))) << label;
        // Against torch as shipped, the moments still match; MKL's sqrt can
        // move a weight by its last bit (docs/runtime.md).
        const auto& real = c["torch"];
        EXPECT_EQ(bits(m), bits(floats_of(real["exp_avg"]))) << label;
        EXPECT_EQ(bits(v), bits(floats_of(real["exp_avg_sq"]))) << label;
        EXPECT_TRUE(within_last_bit_of_update(param, floats_of(real["param"]))) << label;
      } else {
        const SgdConfig config{.lr = cfg["lr"],
                               .momentum = cfg["momentum"],
                               .dampening = cfg["dampening"],
                               .weight_decay = cfg["weight_decay"],
                               .nesterov = cfg["nesterov"],
                               .maximize = cfg["maximize"]};
        Floats buf(config.momentum != 0 ? n : 0);
        int64_t step = 0;
        for (const auto& g : c["grads"]) {
          const Floats grad = floats_of(g);
          sgd_step(config, ++step, {param, grad, buf}, {}, {.isa = isa});
        }
        EXPECT_EQ(bits(param), bits(floats_of(c["torch"]["param"]))) << label;
        if (!buf.empty()) {
          EXPECT_EQ(bits(buf), bits(floats_of(c["torch"]["momentum_buffer"]))) << label;
        }
      }
      // torch's .to(torch.bfloat16) and .half() of its final weights.
      const Floats final_param = floats_of(c["torch"]["param"]);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(float_to_bf16(final_param[i]), c["torch"]["bf16"][i].get<uint16_t>()) << label;
        ASSERT_EQ(float_to_fp16(final_param[i]), c["torch"]["fp16"][i].get<uint16_t>()) << label;
      }
    }
  }
}

TEST(CpuOptimizer, BadArgumentsThrow) {
  Floats p(8), g(8), m(8), v(8), short_buf(7);
  Halfs copy(8), short_copy(7);
  const AdamWConfig ok;
  EXPECT_NO_THROW(adamw_step(ok, 1, {p, g, m, v}));
  EXPECT_THROW(adamw_step(ok, 1, {p, g, short_buf, v}), OptimizerError);
  EXPECT_THROW(adamw_step(ok, 1, {p, {g.data(), 7}, m, v}), OptimizerError);
  EXPECT_THROW(adamw_step(ok, 1, {p, {static_cast<const float*>(nullptr), 8}, m, v}),
               OptimizerError);
  EXPECT_THROW(adamw_step(ok, 0, {p, g, m, v}), OptimizerError);
  EXPECT_THROW(adamw_step({.lr = NAN}, 1, {p, g, m, v}), OptimizerError);
  EXPECT_THROW(adamw_step({.lr = INFINITY}, 1, {p, g, m, v}), OptimizerError);
  EXPECT_THROW(adamw_step({.lr = -1}, 1, {p, g, m, v}), OptimizerError);
  EXPECT_THROW(adamw_step({.beta1 = 1.0}, 1, {p, g, m, v}), OptimizerError);
  EXPECT_THROW(adamw_step({.beta2 = -0.1}, 1, {p, g, m, v}), OptimizerError);
  EXPECT_THROW(adamw_step({.eps = NAN}, 1, {p, g, m, v}), OptimizerError);
  EXPECT_THROW(adamw_step({.weight_decay = -1}, 1, {p, g, m, v}), OptimizerError);
  EXPECT_THROW(adamw_step(ok, 1, {p, g, m, v}, {HalfType::bf16, short_copy}), OptimizerError);
  EXPECT_THROW(adamw_step(ok, 1, {p, g, m, v}, {HalfType::none, copy}), OptimizerError);
  EXPECT_THROW(adamw_step(ok, 1, {p, g, m, v}, {}, {.tile = 0}), OptimizerError);
  for (Isa isa : {Isa::avx2, Isa::avx512}) {
    if (!isa_supported(isa)) {
      EXPECT_THROW(adamw_step(ok, 1, {p, g, m, v}, {}, {.isa = isa}), OptimizerError);
    }
  }
  // Empty buffers are fine, null or not.
  EXPECT_NO_THROW(adamw_step(ok, 1, {}));

  EXPECT_NO_THROW(sgd_step({.momentum = 0.9}, 1, {p, g, m}));
  EXPECT_THROW(sgd_step({.momentum = 0.9}, 1, {p, g, {}}), OptimizerError);
  EXPECT_THROW(sgd_step({}, 1, {p, g, m}), OptimizerError);  // a buffer without momentum
  EXPECT_THROW(sgd_step({.momentum = -0.5}, 1, {p, g, {}}), OptimizerError);
  EXPECT_THROW(sgd_step({.nesterov = true}, 1, {p, g, {}}), OptimizerError);
  EXPECT_THROW(sgd_step({.momentum = 0.9, .dampening = 0.1, .nesterov = true}, 1, {p, g, m}),
               OptimizerError);
  EXPECT_THROW(sgd_step({.dampening = NAN}, 1, {p, g, {}}), OptimizerError);
  try {
    adamw_step(ok, 1, {p, g, short_buf, v});
  } catch (const OptimizerError& e) {
    EXPECT_STREQ(e.what(), "cpu optimizer: exp_avg has 7 elements, param has 8");
  }
}

}  // namespace
}  // namespace memwall::runtime
