// Measurements shared by `memwall bench offload` and `memwall calibrate`:
// the NVMe engine's sequential write and read rates, and host<->device
// copies through the copy engine (against a plain memcpy of the same bytes).
#pragma once

#include <cstdint>
#include <string>

namespace memwall::cli {

struct NvmeRates {
  double write_gbps = 0, read_gbps = 0;
  std::string warning;  // the engine's, when it fell back to buffered or unregistered I/O
};

// `size` bytes as tensors of `tensor` bytes through one engine on `dir`,
// all submitted then all waited for (the queue depth bounds what is in
// flight); bounce buffers from a pinned pool.
NvmeRates measure_nvme_engine(const std::string& dir, uint64_t size, uint64_t block,
                              uint64_t tensor, int depth);

struct CopyRates {
  double h2d_gbps = 0, d2h_gbps = 0;  // the copy engine, each way
  double memcpy_gbps = 0;             // std::memcpy between the same buffers
  std::string engine;
};

// Note [Emulated device copies]: device memory from memwall's own device
// allocator, host memory from the pinned pool; best of `repeats`.
CopyRates measure_copies(uint64_t bytes, int repeats);

// The CPU AdamW step (runtime/cpu_optimizer.h) over `params` fp32
// parameters on every thread, best of `repeats`: parameter updates per second.
double measure_cpu_adam(uint64_t params, int repeats);

// A new directory under $TMPDIR (or /tmp) named `stem`-XXXXXX.
std::string make_temp_dir(const std::string& stem);

}  // namespace memwall::cli
