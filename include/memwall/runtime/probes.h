// Measurements of the runtime engines (DESIGN.md "runtime": calibration
// probes) shared by `memwall bench offload`, `memwall bench cpu-adam` and
// `memwall calibrate`: the NVMe engine's sequential write and read rates
// (and fio's on the same directory), host<->device copies through the copy
// engine (against a plain memcpy of the same bytes), the CPU AdamW step, the
// memory bandwidth that bounds it, and the step overlapped with its copy to
// the device. Each returns figures; assembling them into a hardware profile
// is hw's (memwall/hw/calibration.h), printing them the command line's.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace memwall::runtime {

// A probe that cannot measure: the device cannot hold its bytes, the copy
// load failed, fio cannot run. One line; the command line reports it as
// bad input (exit 2), as memwall::Error, which runtime does not see.
class ProbeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The median of `values` (0 when empty): benchmarks that alternate
// contenders report medians, the drift of a shared machine cancelling. The
// same as memwall::median (memwall/base/median.h), which the runtime may
// not include (DESIGN.md: runtime depends on alloc only).
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

// Bytes an AdamW update reads and writes per parameter: param, grad,
// exp_avg, exp_avg_sq read, param, exp_avg, exp_avg_sq written (+2 for a
// bf16 copy of the weights).
inline int64_t adam_bytes_per_update(bool bf16_copy) { return 16 + 12 + (bf16_copy ? 2 : 0); }

// Bytes read + written per second by memcpy of `bytes`, on `threads`
// threads each copying its share; best of `repeats`.
double memcpy_bandwidth(size_t bytes, unsigned threads, int repeats);

// Bytes read + written per second by STREAM's triad a = b + s * c on
// floats (12 bytes per element), `threads` threads each on its share: the
// compiler's plain stores, which memcpy's large-size path may not use.
double triad_bandwidth(size_t bytes, unsigned threads, int repeats);

// Note [Overlapped offload step]: the step over `n` parameters with its
// bf16 copy followed by the copy to the (emulated) device, against the
// tiled step that overlaps the two; one thread for the step, the copy
// engine's own for the copy. Best seconds of each.
struct OverlapSeconds {
  double sequential = 0, overlapped = 0;
};
OverlapSeconds overlap_seconds(int64_t n, int repeats);

// `memwall bench offload`: the NVMe engine against fio (io_uring,
// O_DIRECT, the same block size and queue depth) on one directory.
struct NvmeBenchSpec {
  std::string dir;
  uint64_t size = 0, block = 0, tensor = 0;
  std::vector<int> depths;
  int repeats = 1;
  bool fio = true;  // false: the engine alone
  // The file fio writes (removed before each fio run, at the end and on an
  // error; on an interrupt by whoever registered it).
  std::string fio_file;
};
struct NvmeAgainstFio {
  int depth = 0;
  std::string op;                   // "write" or "read"
  std::vector<double> engine_gbps;  // per repeat
  std::vector<double> fio_gbps;     // per repeat; empty: not measured
};
// Per depth a write row and a read row: the engine and fio `repeats` times
// each, alternating, so that a shared disk's drift falls on both.
// `each_run(rates, repeat)` is called after every engine run (its warning
// and note are the caller's to say). Throws NvmeError from the engine,
// ProbeError when fio fails.
std::vector<NvmeAgainstFio> nvme_against_fio(
    const NvmeBenchSpec& spec, const std::function<void(const NvmeRates&, int)>& each_run);
// `memwall bench offload` whole: nvme_against_fio, then host<->device
// copies of the run's size, at most 256 MiB, best of 3 (measure_copies).
struct OffloadBench {
  std::vector<NvmeAgainstFio> nvme;
  uint64_t copy_bytes = 0;
  CopyRates copies;
};
OffloadBench measure_offload(const NvmeBenchSpec& spec,
                             const std::function<void(const NvmeRates&, int)>& each_run);
// The median of engine[i] / fio[i].
double median_ratio(const NvmeAgainstFio& row);
// fio's bandwidth in GB/s for one job (`rw`: "write" or "read"); throws
// ProbeError naming the command when fio cannot run or says nothing.
double fio_gbps(const std::string& file, uint64_t size, uint64_t block, int depth, const char* rw);

}  // namespace memwall::runtime
