// The CPU optimizer step of ZeRO-Offload (issue 21): AdamW and SGD with
// momentum, in place over fp32 master weights and optimizer states, with an
// optional bf16 or fp16 copy of the updated weights written in the same
// pass (the copy the device receives). Element for element the results are
// those of torch.optim.AdamW / torch.optim.SGD (foreach=False) on CPU: the
// same operations in the same order, FMA exactly where ATen's vectorized
// kernels use one (docs/runtime.md lists them, and the one place where torch
// differs: its sqrt is MKL's, which is not correctly rounded).
//
// The scalar, AVX2+FMA+F16C and AVX-512 paths give bitwise the same results;
// the widest the CPU has is chosen at run time. Work is split into tiles of
// StepOptions::tile elements, processed by up to StepOptions::threads
// threads (started for the call); the result does not depend on either.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>

namespace memwall::runtime {

// Bad arguments (sizes, null buffers, hyperparameters, an ISA the CPU lacks):
// one line naming the argument.
class OptimizerError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

enum class Isa { scalar, avx2, avx512 };

// "scalar", "avx2" (AVX2+FMA+F16C), "avx512" (AVX-512F).
const char* isa_name(Isa isa);
// Whether this CPU (and OS) runs `isa`.
bool isa_supported(Isa isa);
// The widest supported ISA: what a step uses unless told otherwise.
Isa best_isa();

// The low-precision copy of the updated weights: none, bfloat16 or IEEE
// half, both rounded to nearest even (torch's .to(torch.bfloat16) and
// .half()). A NaN becomes 0x7FC0 in bf16 (c10::BFloat16) and a quiet NaN
// with the sign and the top payload bits in fp16 (F16C's vcvtps2ph).
enum class HalfType { none, bf16, fp16 };

struct HalfCopy {
  HalfType type = HalfType::none;
  std::span<uint16_t> out;  // param.size() elements when type != none
};

struct StepOptions {
  std::optional<Isa> isa;  // default: best_isa()
  unsigned threads = 0;    // 0: std::thread::hardware_concurrency()
  size_t tile = 65536;     // elements per unit of work
};

// torch.optim.AdamW's hyperparameters (amsgrad=False).
struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool maximize = false;
};

struct AdamWState {
  std::span<float> param;
  std::span<const float> grad;
  std::span<float> exp_avg;     // zeros before step 1, as torch initializes it
  std::span<float> exp_avg_sq;  // likewise
};

// One AdamW step; `step` counts from 1 (torch's state["step"] after its
// increment). Cost: reads 16 bytes and writes 12 (+2 with a copy) per
// parameter, about 10 flops and one divide and one sqrt; memory-bound on
// most machines once several threads run.
void adamw_step(const AdamWConfig& config, int64_t step, const AdamWState& state,
                const HalfCopy& copy = {}, const StepOptions& options = {});

// torch.optim.SGD's hyperparameters.
struct SgdConfig {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;
};

struct SgdState {
  std::span<float> param;
  std::span<const float> grad;
  // param.size() elements when momentum != 0, else empty. Its contents at
  // step 1 are ignored: torch starts the buffer as a copy of the gradient.
  std::span<float> momentum_buffer;
};

// One SGD step; `step` counts from 1. Cost: reads 8 bytes (12 with
// momentum) and writes 4 (8 with momentum, +2 with a copy) per parameter.
void sgd_step(const SgdConfig& config, int64_t step, const SgdState& state,
              const HalfCopy& copy = {}, const StepOptions& options = {});

// The scalar roundings the copies use, for tests and callers.
uint16_t float_to_bf16(float value);
uint16_t float_to_fp16(float value);

}  // namespace memwall::runtime
