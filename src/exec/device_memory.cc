#include "device_memory.h"

#include <algorithm>
#include <cstring>

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>

namespace memwall::exec {

struct DeviceMemory::Block {
  DeviceMemory* owner;
  void* ptr;
  uint64_t bytes;
  uint64_t allocated;
};

DeviceMemory::DeviceMemory(alloc::Allocator& allocator, uint64_t budget)
    : allocator_(allocator), budget_(budget), host_(c10::GetCPUAllocator()) {}

DeviceMemory::~DeviceMemory() = default;

c10::DataPtr DeviceMemory::allocate(size_t bytes) {
  const c10::Device device(c10::kCPU);
  if (bytes == 0) return {nullptr, nullptr, &release, device};
  const alloc::Allocation a = allocator_.allocate(bytes);
  if (!a) {
    const alloc::Stats s = allocator_.stats();
    TORCH_CHECK_WITH(OutOfMemoryError, false,
                     fmt::format("out of device memory: {} bytes asked with {} live ({} held by "
                                 "the allocator) of the budget {}",
                                 bytes, live_bytes(), s.reserved_bytes, budget_));
  }
  auto* block = new Block{this, a.ptr, bytes, a.block_bytes};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    live_ += bytes;
    live_allocated_ += a.block_bytes;
    peak_ = std::max(peak_, live_);
    peak_allocated_ = std::max(peak_allocated_, live_allocated_);
  }
  return {a.ptr, block, &release, device};
}

void DeviceMemory::release(void* ctx) {
  if (ctx == nullptr) return;
  auto* block = static_cast<Block*>(ctx);
  DeviceMemory* self = block->owner;
  self->allocator_.free(block->ptr);
  {
    std::lock_guard<std::mutex> lock(self->mutex_);
    self->live_ -= block->bytes;
    self->live_allocated_ -= block->allocated;
  }
  delete block;
}

void DeviceMemory::copy_data(void* dest, const void* src, std::size_t count) const {
  std::memcpy(dest, src, count);
}

uint64_t DeviceMemory::live_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_;
}
uint64_t DeviceMemory::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_;
}
uint64_t DeviceMemory::peak_allocated_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_allocated_;
}
void DeviceMemory::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  peak_ = live_;
  peak_allocated_ = live_allocated_;
}

// c10 keeps the allocator of the highest priority set so far; memwall's
// wins for the run, then the previous one is set back at the same priority.
constexpr uint8_t kPriority = 200;

DeviceMemory::Installed::Installed(DeviceMemory& memory) : previous_(c10::GetCPUAllocator()) {
  c10::SetCPUAllocator(&memory, kPriority);
}
DeviceMemory::Installed::~Installed() { c10::SetCPUAllocator(previous_, kPriority); }

}  // namespace memwall::exec
