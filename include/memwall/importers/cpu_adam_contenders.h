// The contenders of `memwall bench cpu-adam` that live in Python:
// torch.optim.AdamW (foreach=True, fused=True) and DeepSpeed's
// DeepSpeedCPUAdam, timed by one long-lived interpreter per thread count
// that answers requests on a pipe, so that the benchmark can alternate
// memwall's step and theirs, round by round, on the same machine state
// (a shared machine's memory bandwidth drifts more between minutes than
// the contenders differ). The benchmark itself is runtime's
// (memwall/runtime/cpu_adam_contest.h); the command line hands it these.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace memwall {
class PrivateDir;
}

namespace memwall::importers {

// One round of the Python contenders: best seconds per contender
// ("torch_foreach", "torch_fused", "deepspeed"), and for each without a
// figure why not.
struct CpuAdamTimes {
  std::map<std::string, double> seconds;
  std::map<std::string, std::string> why;
};

class CpuAdamContenders {
 public:
  // Starts `python` on the contenders' script (python/memwall/
  // cpu_adam_contenders.py, written from the embedded package into a private
  // directory) with `threads` threads for torch and for OpenMP (DeepSpeed's
  // op uses its own OpenMP runtime, which torch.set_num_threads does not
  // reach). Never throws: a process that cannot start makes every answer
  // say why.
  CpuAdamContenders(const std::string& python, unsigned threads);
  ~CpuAdamContenders();  // ends the interpreter, then removes the package's directory
  CpuAdamContenders(const CpuAdamContenders&) = delete;
  CpuAdamContenders& operator=(const CpuAdamContenders&) = delete;

  // DeepSpeed as the interpreter has it ("deepspeed X"), or why not: its
  // import failed, or the interpreter did not start.
  std::string deepspeed() const;

  // `repeats` AdamW steps over `n` fp32 parameters (with
  // `half.copy_(param)` into bf16 after each when `bf16_copy`), each
  // contender's best.
  CpuAdamTimes time_step(int64_t n, int repeats, bool bf16_copy);

 private:
  nlohmann::json read_answer();
  nlohmann::json ask(int64_t n, int repeats, bool bf16_copy);

  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  std::unique_ptr<PrivateDir> dir_;  // the package, written for the script
  // The script's first answer: {"torch": version, "deepspeed": "deepspeed X"
  // or why not}, or {"error": ...}.
  nlohmann::json about_;
};

// The script's answer to one request ({"foreach": s, "fused": s,
// "deepspeed_cpu_adam": s}, each replaced by "<name>_error" when that
// contender failed, or {"error": ...}) by contender; `deepspeed` is why
// DeepSpeed's figure is absent when the answer does not say.
CpuAdamTimes decode_cpu_adam_times(const nlohmann::json& answer, const std::string& deepspeed);

}  // namespace memwall::importers
