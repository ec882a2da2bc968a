// Bytes into, out of and within device memory (Note [Device bytes]).
//
// Note [Device bytes]
// ~~~~~~~~~~~~~~~~~~~
// The executor moves bytes into device memory (a buffer's starting value, a
// step's batch, a session's new state), out of it (the comparison with
// eager, a session's read) and within it (a version copied, a recompute's
// scratch state, an output moved to its offset) through DeviceBytes, never
// with memcpy on a device pointer. On the emulated device (Note [Emulated
// device] in device_memory.h) device memory is host memory, and the two
// functions are memcpy and memset. On a GPU the host cannot touch device
// memory: the CUDA path (docs/exec.md, "A CUDA path: what it needs") sets
// them to libmemwall_exec_cuda.so's memwall_exec_cuda_copy_v1 and
// memwall_exec_cuda_zero_v1 (src/exec/cuda/cuda_device_memory.h: a copy
// of unified addresses, or a memset, on torch's current stream, returned
// from once the bytes are there), so that the executor's logic is one for
// both devices. A slot's host copy (the pinned pool) and NVMe are not
// device memory: the copy engine and the NVMe engine move those.
#pragma once
#include <cstdint>
#include <cstring>

#include "exec_error.h"

namespace memwall::exec {

struct DeviceBytes {
  // 0, or -1 with last_error() saying why (the CUDA library's convention).
  using CopyFunction = int (*)(void* to, const void* from, uint64_t bytes);
  using ZeroFunction = int (*)(void* to, uint64_t bytes);
  using ErrorFunction = const char* (*)();

  static int host_copy(void* to, const void* from, uint64_t bytes) {
    if (bytes > 0) std::memcpy(to, from, bytes);
    return 0;
  }
  static int host_zero(void* to, uint64_t bytes) {
    if (bytes > 0) std::memset(to, 0, bytes);
    return 0;
  }

  CopyFunction copy_function = host_copy;
  ZeroFunction zero_function = host_zero;
  ErrorFunction last_error = nullptr;

  // `bytes` from `from` to `to`, either or both device memory; throws
  // RunFailed when the device refuses.
  void copy(void* to, const void* from, uint64_t bytes) const {
    if (copy_function(to, from, bytes) != 0) failed("copy", bytes);
  }
  void zero(void* to, uint64_t bytes) const {
    if (zero_function(to, bytes) != 0) failed("zeroing", bytes);
  }

 private:
  [[noreturn]] void failed(const char* what, uint64_t bytes) const {
    run_failed("device memory: {} of {} bytes failed: {}", what, bytes,
               last_error != nullptr ? last_error() : "no reason given");
  }
};

// Host memory (the pinned pool's): memcpy and memset whatever the device.
inline constexpr DeviceBytes kHostBytes{};

}  // namespace memwall::exec
