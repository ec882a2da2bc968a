// libmemwall_torch_alloc.so: memwall's runtime allocator as PyTorch's CPU
// allocator (c10::SetCPUAllocator), so that a real training step runs on it.
//
//   lib = ctypes.CDLL("libmemwall_torch_alloc.so")
//   lib.memwall_torch_install(b"stitching", 8 << 30)   # before any training
//   ... train ...
//   json.loads(lib.memwall_torch_stats_json())
//
// Note [One allocator per process]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A tensor's DataPtr carries the deleter of the allocator that made it, so
// tensors allocated before the install keep going back to PyTorch's own
// allocator, and ours to ours: switching at any time is safe. Installing a
// second time is refused, because tensors of the first allocator would then
// be freed into the second. The state is never destroyed: PyTorch frees
// tensors during interpreter shutdown, after static destructors would run.
#include <c10/core/CPUAllocator.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include "memwall/alloc/allocator.h"
#include "memwall/alloc/device.h"

namespace {

using memwall::alloc::Allocation;

struct State {
  std::unique_ptr<memwall::alloc::Device> device;
  std::unique_ptr<memwall::alloc::Allocator> allocator;
  std::string stats_json;
};

State* g_state = nullptr;    // set once by memwall_torch_install; never freed
std::mutex g_install_mutex;  // guards the install, g_last_error and stats_json
std::string g_last_error;

void free_block(void* ptr) {
  if (ptr != nullptr) g_state->allocator->free(ptr);
}

class MemwallCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) override {
    const c10::Device cpu(c10::DeviceType::CPU);
    // PyTorch's own CPU allocator also gives empty tensors no memory.
    if (bytes == 0) return {nullptr, nullptr, &free_block, cpu};
    Allocation a;
    try {
      a = g_state->allocator->allocate(bytes);
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "memwall allocator: ", e.what());
    }
    TORCH_CHECK(a.ptr != nullptr, "memwall allocator (", g_state->allocator->policy(),
                "): out of memory allocating ", bytes, " bytes on a device of ",
                g_state->device->capacity(), " bytes");
    return {a.ptr, a.ptr, &free_block, cpu};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_block; }
  // Host memory: a plain memcpy (Allocator::clone of a CPU tensor).
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

}  // namespace

extern "C" {

// Installs memwall's allocator with `policy` (caching, expandable or
// stitching; "plan" needs offsets from a layout and is refused) over
// `capacity` bytes of memfd-backed host memory. Returns 0, or -1 with
// memwall_torch_last_error() saying why.
int memwall_torch_install(const char* policy, uint64_t capacity) {
  std::lock_guard lock(g_install_mutex);
  try {
    if (g_state != nullptr) {
      throw std::runtime_error("already installed (Note [One allocator per process])");
    }
    if (std::string(policy) == "plan") {
      throw std::runtime_error(
          "the plan policy places requests by a static layout's offsets; PyTorch's requests "
          "carry none");
    }
    auto state = std::make_unique<State>();
    state->device = memwall::alloc::make_host_vmm(capacity);
    state->allocator = memwall::alloc::make_allocator(policy, *state->device);
    g_state = state.release();
    static MemwallCpuAllocator allocator;
    // Priority above the default allocator's, which registered at 0.
    c10::SetCPUAllocator(&allocator, /*priority=*/1);
    return 0;
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return -1;
  }
}

// Why the last memwall_torch_install failed ("" if none did).
const char* memwall_torch_last_error() {
  std::lock_guard lock(g_install_mutex);
  return g_last_error.c_str();
}

// The allocator's snapshot (statistics, segments and blocks) as JSON, or
// "null" before memwall_torch_install. Valid until the next call.
const char* memwall_torch_stats_json() {
  std::lock_guard lock(g_install_mutex);
  if (g_state == nullptr) return "null";
  g_state->stats_json = g_state->allocator->snapshot_json();
  return g_state->stats_json.c_str();
}

}  // extern "C"
