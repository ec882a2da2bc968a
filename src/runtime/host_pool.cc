#include "memwall/runtime/host_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>

namespace memwall::runtime {
namespace {

uint64_t round_up(uint64_t bytes) {
  return (bytes + kHostPoolAlignment - 1) / kHostPoolAlignment * kHostPoolAlignment;
}

std::string mib(uint64_t bytes) {
  char text[48];
  std::snprintf(text, sizeof text, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

}  // namespace

HostBuffer::HostBuffer(HostBuffer&& other) noexcept
    : pool_(other.pool_), data_(other.data_), size_(other.size_) {
  other.pool_ = nullptr;
  other.data_ = nullptr;
  other.size_ = 0;
}

HostBuffer& HostBuffer::operator=(HostBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    pool_ = other.pool_;
    data_ = other.data_;
    size_ = other.size_;
    other.pool_ = nullptr;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

HostBuffer::~HostBuffer() { reset(); }

void HostBuffer::reset() {
  if (pool_ != nullptr && data_ != nullptr) pool_->release(data_, size_);
  pool_ = nullptr;
  data_ = nullptr;
  size_ = 0;
}

HostPool::HostPool(uint64_t capacity_bytes, bool pin, std::shared_ptr<HostRegistrar> registrar)
    : capacity_(capacity_bytes), pin_(pin), registrar_(std::move(registrar)) {
  if (capacity_bytes == 0) throw std::invalid_argument("host pool: the capacity must be > 0");
  stats_.capacity_bytes = capacity_bytes;
}

HostPool::~HostPool() {
  const std::lock_guard lock(mutex_);
  // Buffers still out would dangle: unmapping them anyway keeps the
  // process's memory honest, and ASan reports any later use.
  while (!mapped_.empty()) unmap_locked(mapped_.begin()->first);
}

void HostPool::unmap_locked(void* data) {
  const auto it = mapped_.find(data);
  const Mapping m = it->second;
  mapped_.erase(it);
  if (!m.pinned) stats_.unpinned_bytes -= m.size;
  if (m.registered) {
    registrar_->unregister_range(data);
    stats_.registered_bytes -= m.size;
  }
  ::munmap(data, m.size);  // cannot fail for a range this pool mapped
  stats_.mapped_bytes -= m.size;
  ++stats_.unmaps;
}

bool HostPool::evict_for_locked(uint64_t bytes) {
  // Largest cached buffers first: fewest munmaps to make room.
  while (stats_.mapped_bytes + bytes > capacity_ && !cached_.empty()) {
    const auto last = std::prev(cached_.end());
    void* data = last->second;
    cached_.erase(last);
    unmap_locked(data);
  }
  return stats_.mapped_bytes + bytes <= capacity_;
}

HostBuffer HostPool::allocate(uint64_t bytes) {
  if (bytes == 0) throw std::invalid_argument("host pool: cannot allocate 0 bytes");
  if (bytes > UINT64_MAX - kHostPoolAlignment) {
    throw std::invalid_argument("host pool: " + std::to_string(bytes) + " bytes is too large");
  }
  const uint64_t size = round_up(bytes);
  const std::lock_guard lock(mutex_);
  void* data = nullptr;
  if (const auto it = cached_.find(size); it != cached_.end()) {
    data = it->second;
    cached_.erase(it);
    ++stats_.reuses;
  } else {
    if (!evict_for_locked(size)) {
      throw std::runtime_error("host pool: " + mib(size) + " requested, capacity " +
                               mib(capacity_) + ", " + mib(stats_.in_use_bytes) + " in use");
    }
    data = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data == MAP_FAILED) {
      throw std::runtime_error("host pool: mmap of " + mib(size) +
                               " failed: " + std::strerror(errno));
    }
    const bool pinned = pin_ && ::mlock(data, size) == 0;
    if (!pinned) stats_.unpinned_bytes += size;
    bool registered = false;
    if (registrar_ != nullptr) {
      std::string why;
      registered = registrar_->register_range(data, size, why);
      if (registered) {
        stats_.registered_bytes += size;
      } else {
        registration_error_ = why;
      }
    }
    mapped_[data] = Mapping{size, pinned, registered};
    stats_.mapped_bytes += size;
    ++stats_.maps;
  }
  stats_.in_use_bytes += size;
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  ++stats_.allocations;
  return HostBuffer(this, data, size);
}

void HostPool::release(void* data, uint64_t size) {
  const std::lock_guard lock(mutex_);
  stats_.in_use_bytes -= size;
  cached_.emplace(size, data);
}

void HostPool::trim() {
  const std::lock_guard lock(mutex_);
  for (const auto& [size, data] : cached_) unmap_locked(data);
  cached_.clear();
}

HostPoolStats HostPool::stats() const {
  const std::lock_guard lock(mutex_);
  return stats_;
}

std::string HostPool::registration_error() const {
  const std::lock_guard lock(mutex_);
  return registration_error_;
}

}  // namespace memwall::runtime
