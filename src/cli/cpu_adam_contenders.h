// The contenders of `memwall bench cpu-adam` that live in Python:
// torch.optim.AdamW (foreach=True, fused=True) and DeepSpeed's
// DeepSpeedCPUAdam, timed by one long-lived interpreter per thread count
// that answers requests on a pipe, so that the benchmark can alternate
// memwall's step and theirs, round by round, on the same machine state
// (a shared machine's memory bandwidth drifts more between minutes than
// the contenders differ).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace memwall {
class PrivateDir;
}

namespace memwall::cli {

class CpuAdamContenders {
 public:
  // Starts `python` on the contenders' script (python/memwall/
  // cpu_adam_contenders.py, written from the embedded package into a private
  // directory) with `threads` threads for torch and for OpenMP (DeepSpeed's
  // op uses its own OpenMP runtime, which torch.set_num_threads does not
  // reach). Never throws: a process that cannot start makes every answer an
  // {"error": ...}.
  CpuAdamContenders(const std::string& python, unsigned threads);
  ~CpuAdamContenders();  // ends the interpreter, then removes the package's directory
  CpuAdamContenders(const CpuAdamContenders&) = delete;
  CpuAdamContenders& operator=(const CpuAdamContenders&) = delete;

  // What the interpreter has: {"torch": version, "deepspeed": "deepspeed X" or
  // why not}, or {"error": ...}.
  const nlohmann::json& about() const { return about_; }

  // Best seconds of `repeats` AdamW steps over `n` fp32 parameters (with
  // `half.copy_(param)` into bf16 after each when `bf16_copy`):
  // {"foreach": s, "fused": s, "deepspeed_cpu_adam": s}, each replaced by
  // "<name>_error" when that contender failed, or {"error": ...}.
  nlohmann::json time_step(int64_t n, int repeats, bool bf16_copy);

 private:
  nlohmann::json read_answer();

  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  std::unique_ptr<PrivateDir> dir_;  // the package, written for the script
  nlohmann::json about_;
};

}  // namespace memwall::cli
