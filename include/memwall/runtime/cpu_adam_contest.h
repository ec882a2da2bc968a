// `memwall bench cpu-adam`'s measurements: memwall's CPU AdamW step
// (cpu_optimizer.h) against other implementations of the same step and
// against the memory-bandwidth bound, per thread count, round by round.
// The other implementations come through AdamContenders: the Python ones
// (torch, DeepSpeed) are importers', which runtime does not see, so the
// caller adapts them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "memwall/runtime/probes.h"

namespace memwall::runtime {

// The contenders a case reports beside "memwall", in the output's order.
inline const std::vector<std::string> kAdamContenders = {"torch_foreach", "torch_fused",
                                                         "deepspeed"};

// One round of the contenders: best seconds per contender (of
// kAdamContenders), and for each without a figure why not.
struct ContenderSeconds {
  std::map<std::string, double> seconds;
  std::map<std::string, std::string> why;
};

class AdamContenders {
 public:
  virtual ~AdamContenders() = default;
  // DeepSpeed's version, or why it has no figures.
  virtual std::string deepspeed() const = 0;
  // `repeats` steps over `n` fp32 parameters, with a bf16 copy of the
  // weights when `bf16_copy`.
  virtual ContenderSeconds time_step(int64_t n, int repeats, bool bf16_copy) = 0;
};

// Contenders that do not run, each saying `why`.
class NoContenders : public AdamContenders {
 public:
  explicit NoContenders(std::string why) : why_(std::move(why)) {}
  std::string deepspeed() const override { return why_; }
  ContenderSeconds time_step(int64_t, int, bool) override;

 private:
  std::string why_;
};

// Makes the contenders for one thread count; they live while its cases run.
using StartContenders = std::function<std::unique_ptr<AdamContenders>(unsigned threads)>;

struct CpuAdamContest {
  std::vector<int64_t> sizes;           // parameters per case
  std::vector<bool> copies;             // without and/or with the bf16 copy
  std::vector<unsigned> thread_counts;  // each >= 1
  uint64_t bandwidth_bytes = 0;         // what memcpy and triad move for the bound
  int repeats = 1;                      // steps per measurement, the best kept
  int rounds = 1;                       // measurements per contender, alternating
};

// A contender's figures in a case: updates per second each round, their
// median, and the median of memwall's over its, round by round (each pair
// ran back to back).
struct ContenderRounds {
  std::vector<double> per_s;
  double median_per_s = 0;
  double memwall_over = 0;  // 1 for memwall itself
};

struct CpuAdamCase {
  int64_t params = 0;
  unsigned threads = 0;
  bool bf16_copy = false;
  int rounds = 0;
  int64_t bytes_per_update = 0;
  double memcpy_bytes_per_s = 0, triad_bytes_per_s = 0;
  double bandwidth_limit_per_s = 0;  // the better bandwidth over bytes_per_update
  // "memwall" and each contender with a figure in every round.
  std::map<std::string, ContenderRounds> figures;
  // Each contender of kAdamContenders without: why.
  std::map<std::string, std::string> why;
};

struct CpuAdamContestResults {
  std::string deepspeed;           // the last thread count's contenders' word on DeepSpeed
  std::vector<CpuAdamCase> cases;  // per thread count, per size, per copy
  std::vector<std::pair<int64_t, OverlapSeconds>> overlaps;  // per size, one thread
};

// Per thread count the bandwidth bound, then per case memwall's step
// (cpu_adam_seconds) and the contenders' (started by `start`),
// alternating round by round; then the overlapped offload step per size
// (overlap_seconds).
CpuAdamContestResults run_cpu_adam_contest(const CpuAdamContest& contest,
                                           const StartContenders& start);

}  // namespace memwall::runtime
