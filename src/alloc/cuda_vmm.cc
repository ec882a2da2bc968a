// The CUDA VMM backend: cuMemAddressReserve / cuMemCreate / cuMemMap /
// cuMemSetAccess / cuMemUnmap / cuMemRelease behind the Device interface.
//
// Note [CUDA entry points]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// memwall links nothing from CUDA: binaries must load and run on machines
// without a driver (like this repository's CI). Only cuda.h is used at
// compile time (for types and, through decltype, the exact signatures); at
// run time make_cuda_vmm dlopens libcuda.so.1, takes cuGetProcAddress from it
// and resolves every other entry point through it for the CUDA 12.0 ABI
// (falling back to plain dlsym of the versioned names on drivers without
// cuGetProcAddress). Any missing piece - the library, a symbol, cuInit, the
// GPU - makes make_cuda_vmm return null with the reason, never abort.
// The file compiles to a stub when CMake found no toolkit.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "budgeted_device.h"
#include "memwall/alloc/device.h"
#include "memwall/alloc/error.h"

#ifdef MEMWALL_HAVE_CUDA
#include <cuda.h>
#include <dlfcn.h>

#include <mutex>
#endif

namespace memwall::alloc {

#ifdef MEMWALL_HAVE_CUDA
namespace {

// The ABI version every entry point is requested at (all exist since 11.x).
constexpr int kEntryPointVersion = 12000;

struct Driver {
  void* library = nullptr;
  decltype(&cuGetErrorString) get_error_string = nullptr;
  decltype(&cuInit) init = nullptr;
  decltype(&cuDeviceGetCount) device_get_count = nullptr;
  decltype(&cuDeviceGet) device_get = nullptr;
  decltype(&cuDeviceTotalMem) device_total_mem = nullptr;
  decltype(&cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&cuDevicePrimaryCtxRelease) primary_ctx_release = nullptr;
  decltype(&cuCtxSetCurrent) ctx_set_current = nullptr;
  decltype(&cuMemGetAllocationGranularity) get_granularity = nullptr;
  decltype(&cuMemAddressReserve) address_reserve = nullptr;
  decltype(&cuMemAddressFree) address_free = nullptr;
  decltype(&cuMemCreate) create = nullptr;
  decltype(&cuMemRelease) release = nullptr;
  decltype(&cuMemMap) map = nullptr;
  decltype(&cuMemUnmap) unmap = nullptr;
  decltype(&cuMemSetAccess) set_access = nullptr;
};

// Loads the driver once per process; returns null and a reason on failure.
const Driver* load_driver(std::string& why) {
  static std::once_flag once;
  static Driver driver;
  static std::string failure;
  std::call_once(once, [] {
    driver.library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (driver.library == nullptr) {
      const char* error = dlerror();
      failure = std::string("cannot load libcuda.so.1 (no NVIDIA driver): ") +
                (error != nullptr ? error : "unknown error");
      return;
    }
    using GetProcAddress =
        CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
    auto get_proc = reinterpret_cast<GetProcAddress>(dlsym(driver.library, "cuGetProcAddress_v2"));
    // `base` goes to cuGetProcAddress, `versioned` (default: base) to dlsym.
    auto resolve = [&](auto& slot, const char* base, const char* versioned = nullptr) {
      if (versioned == nullptr) versioned = base;
      void* pfn = nullptr;
      CUdriverProcAddressQueryResult status{};
      if (get_proc == nullptr || get_proc(base, &pfn, kEntryPointVersion,
                                          CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS) {
        pfn = dlsym(driver.library, versioned);
      }
      if (pfn == nullptr && failure.empty()) {
        failure = std::string("libcuda.so.1 lacks ") + versioned;
      }
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(pfn);
    };
    resolve(driver.get_error_string, "cuGetErrorString");
    resolve(driver.init, "cuInit");
    resolve(driver.device_get_count, "cuDeviceGetCount");
    resolve(driver.device_get, "cuDeviceGet");
    resolve(driver.device_total_mem, "cuDeviceTotalMem", "cuDeviceTotalMem_v2");
    resolve(driver.primary_ctx_retain, "cuDevicePrimaryCtxRetain");
    resolve(driver.primary_ctx_release, "cuDevicePrimaryCtxRelease",
            "cuDevicePrimaryCtxRelease_v2");
    resolve(driver.ctx_set_current, "cuCtxSetCurrent");
    resolve(driver.get_granularity, "cuMemGetAllocationGranularity");
    resolve(driver.address_reserve, "cuMemAddressReserve");
    resolve(driver.address_free, "cuMemAddressFree");
    resolve(driver.create, "cuMemCreate");
    resolve(driver.release, "cuMemRelease");
    resolve(driver.map, "cuMemMap");
    resolve(driver.unmap, "cuMemUnmap");
    resolve(driver.set_access, "cuMemSetAccess");
    if (failure.empty() && driver.init(0) != CUDA_SUCCESS) {
      failure = "cuInit failed (driver present but no usable GPU)";
    }
  });
  why = failure;
  return failure.empty() ? &driver : nullptr;
}

class CudaVmm final : public BudgetedDevice {
 public:
  CudaVmm(const Driver& driver, CUdevice device, CUcontext context, uint64_t granularity,
          uint64_t capacity)
      : BudgetedDevice("cuda-vmm", capacity, granularity),
        driver_(driver),
        device_(device),
        context_(context) {}
  ~CudaVmm() override { driver_.primary_ctx_release(device_); }

  std::string_view name() const override { return "cuda-vmm"; }
  bool host_accessible() const override { return false; }

  uintptr_t reserve(uint64_t bytes) override {
    bind();
    CUdeviceptr base = 0;
    check(driver_.address_reserve(&base, bytes, granularity(), 0, 0), "cuMemAddressReserve");
    return static_cast<uintptr_t>(base);
  }
  void unreserve(uintptr_t base, uint64_t bytes) override {
    bind();
    check(driver_.address_free(static_cast<CUdeviceptr>(base), bytes), "cuMemAddressFree");
  }

  // One cuMemCreate per chunk: its handles are opaque, so every run is a
  // single chunk (Note [Chunk runs]). All or none.
  bool create_chunks(uint64_t count, std::vector<ChunkRun>& runs) override {
    if (count == 0) return true;
    if (!take_budget(count)) return false;
    bind();
    const CUmemAllocationProp prop = properties();
    std::vector<ChunkRun> made;
    made.reserve(count);
    for (uint64_t i = 0; i < count; ++i) {
      CUmemGenericAllocationHandle handle = 0;
      const CUresult result = driver_.create(&handle, granularity(), &prop, 0);
      if (result != CUDA_SUCCESS) {
        for (const ChunkRun& run : made) driver_.release(run.first);
        return_budget(count);
        if (result == CUDA_ERROR_OUT_OF_MEMORY) return false;
        check(result, "cuMemCreate");
      }
      made.push_back({static_cast<ChunkHandle>(handle), 1});
    }
    runs.insert(runs.end(), made.begin(), made.end());
    return true;
  }
  void release_chunks(ChunkRun run) override {
    bind();
    for (uint64_t i = 0; i < run.count; ++i) {
      check(driver_.release(static_cast<CUmemGenericAllocationHandle>(run.first + i)),
            "cuMemRelease");
    }
    return_budget(run.count);
  }

  // A run longer than one chunk holds handles that happened to be
  // consecutive numbers; each is mapped whole, then access is set once for
  // the run's whole range.
  void map_chunks(uintptr_t address, ChunkRun run) override {
    bind();
    const auto at = static_cast<CUdeviceptr>(address);
    for (uint64_t i = 0; i < run.count; ++i) {
      const CUresult result =
          driver_.map(at + i * granularity(), granularity(), 0,
                      static_cast<CUmemGenericAllocationHandle>(run.first + i), 0);
      if (result != CUDA_SUCCESS) {
        if (i != 0) driver_.unmap(at, i * granularity());
        check(result, "cuMemMap");
      }
    }
    CUmemAccessDesc access{};
    access.location = properties().location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    check(driver_.set_access(at, run.count * granularity(), &access, 1), "cuMemSetAccess");
  }
  void unmap(uintptr_t address, uint64_t bytes) override {
    bind();
    check(driver_.unmap(static_cast<CUdeviceptr>(address), bytes), "cuMemUnmap");
  }

  static CUmemAllocationProp properties(CUdevice device) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = static_cast<int>(device);
    return prop;
  }

 private:
  CUmemAllocationProp properties() const { return properties(device_); }
  // The driver API acts on the calling thread's current context, and the
  // allocator may be called from any thread.
  void bind() const { check(driver_.ctx_set_current(context_), "cuCtxSetCurrent"); }
  void check(CUresult result, const char* call) const {
    if (result == CUDA_SUCCESS) return;
    const char* text = nullptr;
    driver_.get_error_string(result, &text);
    throw Error(std::string("cuda-vmm: ") + call +
                " failed: " + (text != nullptr ? text : std::to_string(static_cast<int>(result))));
  }

  const Driver& driver_;
  CUdevice device_;
  CUcontext context_;
};

}  // namespace

std::unique_ptr<Device> make_cuda_vmm(int device_index, uint64_t capacity,
                                      std::string* why_unavailable) {
  std::string why;
  auto unavailable = [&](std::string reason) -> std::unique_ptr<Device> {
    if (why_unavailable != nullptr) *why_unavailable = std::move(reason);
    return nullptr;
  };
  const Driver* driver = load_driver(why);
  if (driver == nullptr) return unavailable(why);
  int count = 0;
  if (driver->device_get_count(&count) != CUDA_SUCCESS || device_index < 0 ||
      device_index >= count) {
    return unavailable("no CUDA device " + std::to_string(device_index) + " (found " +
                       std::to_string(count) + ")");
  }
  CUdevice device = 0;
  CUcontext context = nullptr;
  size_t total = 0;
  size_t granularity = 0;
  const CUmemAllocationProp prop = CudaVmm::properties(device_index);
  if (driver->device_get(&device, device_index) != CUDA_SUCCESS ||
      driver->device_total_mem(&total, device) != CUDA_SUCCESS ||
      driver->get_granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) !=
          CUDA_SUCCESS ||
      driver->primary_ctx_retain(&context, device) != CUDA_SUCCESS) {
    return unavailable("CUDA device " + std::to_string(device_index) +
                       " does not support virtual memory management");
  }
  const uint64_t limit = capacity == 0 ? total : std::min<uint64_t>(capacity, total);
  return std::make_unique<CudaVmm>(*driver, device, context, granularity, limit);
}

bool cuda_vmm_compiled() { return true; }

#else

std::unique_ptr<Device> make_cuda_vmm(int /*device_index*/, uint64_t /*capacity*/,
                                      std::string* why_unavailable) {
  if (why_unavailable != nullptr) {
    *why_unavailable = "memwall was built without the CUDA toolkit";
  }
  return nullptr;
}

bool cuda_vmm_compiled() { return false; }

#endif

}  // namespace memwall::alloc
