// Where the NVMe engine's bounce buffers come from: the pinned host pool
// (Note [Pinned host pool], make_pool_bounce_allocator), or anonymous mmap
// when the caller has no pool; both page aligned, as O_DIRECT needs.
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

class HostPool;
// Buffers of `pool` (which must outlive the allocator's last buffer); the
// pool's capacity bounds them and its statistics count them.
std::shared_ptr<BounceAllocator> make_pool_bounce_allocator(std::shared_ptr<HostPool> pool);

}  // namespace memwall::runtime
