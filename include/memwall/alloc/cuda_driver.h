// The CUDA driver, loaded at run time: the entry points memwall uses, for
// the allocator's VMM backend (alloc/cuda_vmm.cc) and the runtime's copy
// engine and pinned pool (runtime/cuda_copy_engine.cc).
//
// Note [CUDA entry points]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// memwall links nothing from CUDA: binaries must load and run on machines
// without a driver (like this repository's CI). Only cuda.h is used at
// compile time (for types and, through decltype, the exact signatures); at
// run time load_cuda_driver dlopens libcuda.so.1 (or the library that
// $MEMWALL_CUDA_DRIVER names: the tests' fake driver,
// tests/runtime/fake_cuda), takes cuGetProcAddress from it and resolves
// every other entry point through it for the CUDA 12.0 ABI (falling back
// to plain dlsym of the versioned names on drivers without
// cuGetProcAddress). Any missing piece - the library, a symbol, cuInit, the
// GPU - makes the callers return null with the reason, never abort.
// Everything here exists only when CMake found the toolkit
// (MEMWALL_HAVE_CUDA); without it the callers say the build lacks CUDA.
#pragma once

#ifdef MEMWALL_HAVE_CUDA
#include <cuda.h>

#include <string>

namespace memwall::alloc {

struct CudaDriver {
  void* library = nullptr;
  std::string path;  // what was dlopened
  decltype(&cuGetErrorString) get_error_string = nullptr;
  decltype(&cuInit) init = nullptr;
  decltype(&cuDeviceGetCount) device_get_count = nullptr;
  decltype(&cuDeviceGet) device_get = nullptr;
  decltype(&cuDeviceGetName) device_get_name = nullptr;
  decltype(&cuDeviceTotalMem) device_total_mem = nullptr;
  decltype(&cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&cuDevicePrimaryCtxRelease) primary_ctx_release = nullptr;
  decltype(&cuCtxSetCurrent) ctx_set_current = nullptr;
  // Virtual memory management (alloc/cuda_vmm.cc).
  decltype(&cuMemGetAllocationGranularity) get_granularity = nullptr;
  decltype(&cuMemAddressReserve) address_reserve = nullptr;
  decltype(&cuMemAddressFree) address_free = nullptr;
  decltype(&cuMemCreate) create = nullptr;
  decltype(&cuMemRelease) release = nullptr;
  decltype(&cuMemMap) map = nullptr;
  decltype(&cuMemUnmap) unmap = nullptr;
  decltype(&cuMemSetAccess) set_access = nullptr;
  // Streams, events, copies, page-locked host memory (runtime).
  decltype(&cuStreamCreate) stream_create = nullptr;
  decltype(&cuStreamDestroy) stream_destroy = nullptr;
  decltype(&cuStreamSynchronize) stream_synchronize = nullptr;
  decltype(&cuEventCreate) event_create = nullptr;
  decltype(&cuEventDestroy) event_destroy = nullptr;
  decltype(&cuEventRecord) event_record = nullptr;
  decltype(&cuEventQuery) event_query = nullptr;
  decltype(&cuEventSynchronize) event_synchronize = nullptr;
  decltype(&cuStreamWaitEvent) stream_wait_event = nullptr;
  decltype(&cuEventElapsedTime) event_elapsed_time = nullptr;
  decltype(&cuMemcpyHtoDAsync) memcpy_htod_async = nullptr;
  decltype(&cuMemcpyDtoHAsync) memcpy_dtoh_async = nullptr;
  decltype(&cuMemcpyHtoD) memcpy_htod = nullptr;
  decltype(&cuMemcpyDtoH) memcpy_dtoh = nullptr;
  decltype(&cuMemHostRegister) host_register = nullptr;
  decltype(&cuMemHostUnregister) host_unregister = nullptr;
};

// The driver, loaded and initialized once per process; null with `why`
// set when it cannot be (no library, a missing entry point, cuInit failed).
const CudaDriver* load_cuda_driver(std::string& why);

// The driver and its GPU `index` (cuDeviceGet); null with `why` set when
// either is missing ("no CUDA device 3 (found 1)").
const CudaDriver* load_cuda_device(int index, CUdevice& device, std::string& why);

// "cuMemMap failed: CUDA_ERROR_OUT_OF_MEMORY..." for a failed call.
std::string cuda_failure(const CudaDriver& driver, const char* call, CUresult result);

}  // namespace memwall::alloc

#endif  // MEMWALL_HAVE_CUDA
