// The executor's device on a GPU (Note [The CUDA run] in cuda_run.cc):
// libmemwall_exec_cuda.so loaded and installed as torch's CUDA allocator,
// and what the executor asks of the GPU through it. No CUDA header: the
// library's C functions (src/exec/cuda/cuda_device_memory.h) and ATen's
// device-generic calls are all this side uses.
#pragma once
#include <cstdint>
#include <string>

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>
#include <c10/core/Storage.h>

#include "cuda/cuda_device_memory.h"
#include "device_bytes.h"

namespace memwall::exec {

class CudaRun {
 public:
  // Loads the library (beside libmemwall_exec.so, or
  // $MEMWALL_EXEC_CUDA_LIBRARY) and installs memwall's allocator with
  // `policy` and `budget` bytes on GPU 0, once per process (a second run
  // in the process must ask the same). Throws BadInput when this build or
  // machine cannot: no library, no GPU, a budget past the GPU's memory.
  CudaRun(uint64_t budget, const std::string& policy);

  // Note [Device bytes]: the library's copies and zeroing.
  DeviceBytes bytes() const;
  // `bytes` of device memory; throws c10::OutOfMemoryError past the budget.
  c10::Storage storage(uint64_t bytes) const;
  c10::Device device() const { return {c10::kCUDA, 0}; }
  // The CUDA generator of GPU 0 (Philox: a seed and an offset).
  at::Generator generator() const;

  MemwallExecCudaStatsV2 stats() const;
  void reset_peak() const;
  // Waits for the kernels queued on torch's current stream.
  void synchronize() const;
  // Note [Kernel timing on a GPU]: an event on torch's stream, numbered
  // from 0 since clear_marks(); the seconds between two once both happened.
  uint64_t mark() const;
  double elapsed(uint64_t from, uint64_t to) const;
  void clear_marks() const;
  // Note [Device-side waits] (src/runtime/cuda_copy_engine.cc): an event
  // on torch's stream now (valid until the next record()), for a copy
  // stream to wait on; torch's stream waiting for a copy's event.
  void* record() const;
  void stream_wait(void* event) const;
};

}  // namespace memwall::exec
