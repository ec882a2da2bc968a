// Loads the CUDA driver at run time (Note [CUDA entry points] in
// include/memwall/alloc/cuda_driver.h).
#include "memwall/alloc/cuda_driver.h"

#ifdef MEMWALL_HAVE_CUDA
#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <type_traits>

namespace memwall::alloc {
namespace {

// The ABI version every entry point is requested at (all exist since 11.x).
constexpr int kEntryPointVersion = 12000;

void resolve_all(CudaDriver& driver, std::string& failure) {
  using GetProcAddress =
      CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  auto get_proc = reinterpret_cast<GetProcAddress>(dlsym(driver.library, "cuGetProcAddress_v2"));
  // `base` goes to cuGetProcAddress, `versioned` (default: base) to dlsym.
  auto resolve = [&](auto& slot, const char* base, const char* versioned = nullptr) {
    if (versioned == nullptr) versioned = base;
    void* pfn = nullptr;
    CUdriverProcAddressQueryResult status{};
    if (get_proc == nullptr || get_proc(base, &pfn, kEntryPointVersion, CU_GET_PROC_ADDRESS_DEFAULT,
                                        &status) != CUDA_SUCCESS) {
      pfn = dlsym(driver.library, versioned);
    }
    if (pfn == nullptr && failure.empty()) {
      failure = driver.path + " lacks " + versioned;
    }
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(pfn);
  };
  resolve(driver.get_error_string, "cuGetErrorString");
  resolve(driver.init, "cuInit");
  resolve(driver.device_get_count, "cuDeviceGetCount");
  resolve(driver.device_get, "cuDeviceGet");
  resolve(driver.device_get_name, "cuDeviceGetName");
  resolve(driver.device_total_mem, "cuDeviceTotalMem", "cuDeviceTotalMem_v2");
  resolve(driver.primary_ctx_retain, "cuDevicePrimaryCtxRetain");
  resolve(driver.primary_ctx_release, "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2");
  resolve(driver.ctx_set_current, "cuCtxSetCurrent");
  resolve(driver.get_granularity, "cuMemGetAllocationGranularity");
  resolve(driver.address_reserve, "cuMemAddressReserve");
  resolve(driver.address_free, "cuMemAddressFree");
  resolve(driver.create, "cuMemCreate");
  resolve(driver.release, "cuMemRelease");
  resolve(driver.map, "cuMemMap");
  resolve(driver.unmap, "cuMemUnmap");
  resolve(driver.set_access, "cuMemSetAccess");
  resolve(driver.stream_create, "cuStreamCreate");
  resolve(driver.stream_destroy, "cuStreamDestroy", "cuStreamDestroy_v2");
  resolve(driver.stream_synchronize, "cuStreamSynchronize");
  resolve(driver.event_create, "cuEventCreate");
  resolve(driver.event_destroy, "cuEventDestroy", "cuEventDestroy_v2");
  resolve(driver.event_record, "cuEventRecord");
  resolve(driver.event_query, "cuEventQuery");
  resolve(driver.event_synchronize, "cuEventSynchronize");
  resolve(driver.stream_wait_event, "cuStreamWaitEvent");
  // Version 1 at the 12.0 ABI: every driver has it, with _v2's signature.
  resolve(driver.event_elapsed_time, "cuEventElapsedTime");
  resolve(driver.memcpy_htod_async, "cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync_v2");
  resolve(driver.memcpy_dtoh_async, "cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync_v2");
  resolve(driver.memcpy_htod, "cuMemcpyHtoD", "cuMemcpyHtoD_v2");
  resolve(driver.memcpy_dtoh, "cuMemcpyDtoH", "cuMemcpyDtoH_v2");
  resolve(driver.host_register, "cuMemHostRegister", "cuMemHostRegister_v2");
  resolve(driver.host_unregister, "cuMemHostUnregister");
}

}  // namespace

const CudaDriver* load_cuda_driver(std::string& why) {
  static std::once_flag once;
  static CudaDriver driver;
  static std::string failure;
  std::call_once(once, [] {
    const char* named = std::getenv("MEMWALL_CUDA_DRIVER");
    driver.path = named != nullptr && *named != '\0' ? named : "libcuda.so.1";
    driver.library = dlopen(driver.path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (driver.library == nullptr) {
      const char* error = dlerror();
      failure = "cannot load " + driver.path +
                " (no NVIDIA driver): " + (error != nullptr ? error : "unknown error");
      return;
    }
    resolve_all(driver, failure);
    if (!failure.empty()) return;
    const CUresult result = driver.init(0);
    if (result != CUDA_SUCCESS) {
      failure = "no usable GPU: " + cuda_failure(driver, "cuInit", result);
    }
  });
  why = failure;
  return failure.empty() ? &driver : nullptr;
}

const CudaDriver* load_cuda_device(int index, CUdevice& device, std::string& why) {
  const CudaDriver* driver = load_cuda_driver(why);
  if (driver == nullptr) return nullptr;
  int count = 0;
  if (driver->device_get_count(&count) != CUDA_SUCCESS || index < 0 || index >= count) {
    why = "no CUDA device " + std::to_string(index) + " (found " + std::to_string(count) + ")";
    return nullptr;
  }
  if (const CUresult r = driver->device_get(&device, index); r != CUDA_SUCCESS) {
    why = cuda_failure(*driver, "cuDeviceGet", r);
    return nullptr;
  }
  return driver;
}

std::string cuda_failure(const CudaDriver& driver, const char* call, CUresult result) {
  const char* text = nullptr;
  if (driver.get_error_string != nullptr) driver.get_error_string(result, &text);
  return std::string(call) + " failed: " +
         (text != nullptr ? text : "CUresult " + std::to_string(static_cast<int>(result)));
}

}  // namespace memwall::alloc

#endif  // MEMWALL_HAVE_CUDA
