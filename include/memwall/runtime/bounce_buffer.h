// Where the NVMe engine's bounce buffers come from. Today: anonymous mmap
// (page aligned, which O_DIRECT needs). The pinned host pool will implement
// the same interface, so the engine does not change when it arrives.
#pragma once

#include <cstddef>
#include <memory>

namespace memwall::runtime {

class BounceAllocator {
 public:
  virtual ~BounceAllocator() = default;
  // `bytes` aligned to at least 4096; throws std::runtime_error on failure.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) = 0;
  virtual const char* name() const = 0;
};

// Anonymous private mmap, released with munmap.
std::shared_ptr<BounceAllocator> make_mmap_bounce_allocator();

}  // namespace memwall::runtime
