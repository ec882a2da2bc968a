// The CUDA VMM backend: cuMemAddressReserve / cuMemCreate / cuMemMap /
// cuMemSetAccess / cuMemUnmap / cuMemRelease behind the Device interface.
//
// The driver is loaded at run time (Note [CUDA entry points] in
// include/memwall/alloc/cuda_driver.h); without the toolkit at build time this file
// compiles to a stub.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "budgeted_device.h"
#include "memwall/alloc/cuda_driver.h"
#include "memwall/alloc/device.h"
#include "memwall/alloc/error.h"

namespace memwall::alloc {

#ifdef MEMWALL_HAVE_CUDA
namespace {

class CudaVmm final : public BudgetedDevice {
 public:
  CudaVmm(const CudaDriver& driver, CUdevice device, CUcontext context, uint64_t granularity,
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
    throw Error("cuda-vmm: " + cuda_failure(driver_, call, result));
  }

  const CudaDriver& driver_;
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
  CUdevice device = 0;
  const CudaDriver* driver = load_cuda_device(device_index, device, why);
  if (driver == nullptr) return unavailable(why);
  CUcontext context = nullptr;
  size_t total = 0;
  size_t granularity = 0;
  const CUmemAllocationProp prop = CudaVmm::properties(device_index);
  if (driver->device_total_mem(&total, device) != CUDA_SUCCESS ||
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
