#include "memwall/runtime/bounce_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "memwall/runtime/host_pool.h"

namespace memwall::runtime {
namespace {

class MmapBounceAllocator final : public BounceAllocator {
 public:
  void* allocate(size_t bytes) override {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      throw std::runtime_error("nvme: cannot map " + std::to_string(bytes) +
                               " bytes of bounce buffers: " + std::strerror(errno));
    }
    return p;
  }
  void deallocate(void* ptr, size_t bytes) override { munmap(ptr, bytes); }
  const char* name() const override { return "mmap"; }
};

// The pool hands out HostBuffers; the engine speaks in pointers, so the
// buffers it holds are kept here until it gives them back.
class PoolBounceAllocator final : public BounceAllocator {
 public:
  explicit PoolBounceAllocator(std::shared_ptr<HostPool> pool) : pool_(std::move(pool)) {}
  void* allocate(size_t bytes) override {
    HostBuffer buffer = pool_->allocate(bytes);
    void* ptr = buffer.data();
    const std::lock_guard lock(mutex_);
    held_.emplace(ptr, std::move(buffer));
    return ptr;
  }
  void deallocate(void* ptr, size_t /*bytes*/) override {
    const std::lock_guard lock(mutex_);
    held_.erase(ptr);  // the HostBuffer returns to the pool
  }
  const char* name() const override { return "pinned pool"; }

 private:
  std::shared_ptr<HostPool> pool_;
  std::mutex mutex_;
  std::unordered_map<void*, HostBuffer> held_;
};

}  // namespace

std::shared_ptr<BounceAllocator> make_pool_bounce_allocator(std::shared_ptr<HostPool> pool) {
  if (!pool) throw std::invalid_argument("nvme: a pool bounce allocator needs a pool");
  return std::make_shared<PoolBounceAllocator>(std::move(pool));
}

std::shared_ptr<BounceAllocator> make_mmap_bounce_allocator() {
  return std::make_shared<MmapBounceAllocator>();
}

}  // namespace memwall::runtime
