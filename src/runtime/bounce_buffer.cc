#include "memwall/runtime/bounce_buffer.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

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

}  // namespace

std::shared_ptr<BounceAllocator> make_mmap_bounce_allocator() {
  return std::make_shared<MmapBounceAllocator>();
}

}  // namespace memwall::runtime
