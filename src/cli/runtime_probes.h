// Measurements of the runtime engines shared by `memwall bench offload`,
// `memwall bench cpu-adam` and `memwall calibrate`: the NVMe engine's
// sequential write and read rates, host<->device copies through the copy
// engine (against a plain memcpy of the same bytes), the CPU AdamW step.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace memwall::cli {

// The median of `values` (0 when empty): benchmarks that alternate
// contenders report medians, the drift of a shared machine cancelling.
inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n == 0 ? 0.0 : n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// The fastest of `repeats` calls of `f`, in seconds (no warm-up call).
template <class F>
double best_seconds(int repeats, const F& f) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

struct NvmeRates {
  double write_gbps = 0, read_gbps = 0;
  std::string warning;  // the engine's, when it fell back to buffered or unregistered I/O
  std::string note;     // the engine's: stale swap files it removed (Note [Stale swap files])
};

// `size` bytes as tensors of `tensor` bytes through one engine on `dir`,
// all submitted then all waited for (the queue depth bounds what is in
// flight); bounce buffers from a pinned pool.
NvmeRates measure_nvme_engine(const std::string& dir, uint64_t size, uint64_t block,
                              uint64_t tensor, int depth);

struct CopyRates {
  double h2d_gbps = 0, d2h_gbps = 0;  // the copy engine, each way
  // The engine's plain synchronous copy of the same bytes between the same
  // buffers: memcpy (emulated device) or cuMemcpyHtoD/DtoH (cudaMemcpy's).
  double reference_h2d_gbps = 0, reference_d2h_gbps = 0;
  // Note [Copy latency]: a 64-byte copy issued and waited for, each way in
  // turn, the median of many: what a copy costs beyond its bytes.
  double latency_s = 0;
  std::string engine, reference;
  std::string warning;  // e.g. a pool the driver would not register
};

// Note [Emulated device copies]: device memory from the engine's device
// (memwall's allocator over HostVMM or CUDA VMM), host memory from the
// pinned pool registered with the engine; best of `repeats`.
CopyRates measure_copies(uint64_t bytes, int repeats);

// Note [Measuring copy contention]: copies through the copy engine between
// its device and its pinned pool, alternately host->device and
// device->host, each waited for and followed by a pause as long as it took,
// so that the engine's worker is woken per copy as a swap plan's copies
// wake it beside its kernels (Note [Copy contention] in src/sim). What the
// copies and the kernels of a step do to each other is then measured in
// place: `memwall calibrate --graph` times the kernels with and without it.
struct CopyLoadStats {
  uint64_t copies = 0;
  double busy_s = 0;     // issue to completion, summed over the copies
  double elapsed_s = 0;  // the load's whole time, pauses included
  double mean_copy_s() const { return copies > 0 ? busy_s / static_cast<double>(copies) : 0; }
  double busy_share() const { return elapsed_s > 0 ? busy_s / elapsed_s : 0; }
};

class CopyLoad {
 public:
  explicit CopyLoad(uint64_t block_bytes);
  ~CopyLoad();
  CopyLoad(const CopyLoad&) = delete;
  CopyLoad& operator=(const CopyLoad&) = delete;

  // The load run alone, on the calling thread, for about `seconds`.
  CopyLoadStats alone(double seconds);
  // Starts the load on a thread of its own; stop() ends it and gives what
  // it did since start().
  void start();
  CopyLoadStats stop();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Seconds of one CPU AdamW step (runtime/cpu_optimizer.h) over `n` fp32
// parameters on `threads` threads (0: all), with a bf16 copy if asked; best
// of `repeats` after a step that touches every page.
double cpu_adam_seconds(int64_t n, unsigned threads, bool bf16_copy, int repeats);

}  // namespace memwall::cli
