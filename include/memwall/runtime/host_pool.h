// The pinned host pool: page-locked host buffers that the copy engines and
// the NVMe engine's bounce buffers come from, reused across steps, with a
// capacity (the plan's host memory) and its own statistics.
//
// Note [Pinned host pool]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Page-locking is expensive (mmap + mlock faults in and pins every page:
// about 0.2 ms per MiB here) and a training step asks for the same sizes
// every iteration, so freed buffers are kept by size and handed out again;
// the pool maps new memory only when no cached buffer of the size is free,
// and unmaps cached buffers (largest first) only when a new mapping would
// pass the capacity. Buffers are 4 KiB aligned and their sizes rounded up to
// 4 KiB, as O_DIRECT needs. When mlock fails (RLIMIT_MEMLOCK in a
// container), the buffer stays usable but unpinned, and the statistics say
// how many bytes are unpinned. With a CUDA GPU the pool is given the copy
// engine's HostRegistrar (CopyEngine::host_registrar), which registers each
// mapping with the driver (cuMemHostRegister), so that the GPU's copy
// engines DMA from it directly and cudaMemcpyAsync is truly asynchronous;
// the mapping is unregistered before it is unmapped. The pool itself needs
// no GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "memwall/alloc/host_block.h"

namespace memwall::runtime {

// Whole host blocks (memwall/alloc/host_block.h): what O_DIRECT needs.
inline constexpr uint64_t kHostPoolAlignment = alloc::kHostBlockBytes;

// Registers host memory with a device driver (Note [Pinned host pool]).
class HostRegistrar {
 public:
  virtual ~HostRegistrar() = default;
  // False, with `why`, when the driver refuses; the memory stays usable.
  virtual bool register_range(void* data, uint64_t bytes, std::string& why) = 0;
  virtual void unregister_range(void* data) = 0;  // a start register_range accepted
};

struct HostPoolStats {
  uint64_t capacity_bytes = 0;
  uint64_t mapped_bytes = 0;  // in use + cached
  uint64_t in_use_bytes = 0;
  uint64_t peak_in_use_bytes = 0;
  uint64_t unpinned_bytes = 0;    // mapped but not page-locked (mlock refused)
  uint64_t registered_bytes = 0;  // mapped and registered with the driver
  uint64_t allocations = 0;       // allocate() calls that succeeded
  uint64_t reuses = 0;            // ... of which a cached buffer served
  uint64_t maps = 0, unmaps = 0;  // mmap / munmap calls
};

class HostPool;

// A buffer of the pool; returns to it when destroyed. Move-only.
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(HostBuffer&& other) noexcept;
  HostBuffer& operator=(HostBuffer&& other) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer();

  void* data() const { return data_; }
  uint64_t size() const { return size_; }  // the rounded size
  explicit operator bool() const { return data_ != nullptr; }
  void reset();

 private:
  friend class HostPool;
  HostBuffer(HostPool* pool, void* data, uint64_t size) : pool_(pool), data_(data), size_(size) {}
  HostPool* pool_ = nullptr;
  void* data_ = nullptr;
  uint64_t size_ = 0;
};

class HostPool {
 public:
  // `capacity_bytes` > 0; `pin`: try to page-lock what it maps;
  // `registrar`: also register each mapping with a driver.
  explicit HostPool(uint64_t capacity_bytes, bool pin = true,
                    std::shared_ptr<HostRegistrar> registrar = nullptr);
  ~HostPool();  // unmaps everything; every HostBuffer must be gone
  HostPool(const HostPool&) = delete;
  HostPool& operator=(const HostPool&) = delete;

  // A buffer of at least `bytes` (> 0), 4 KiB aligned. Cost: a map lookup
  // when a cached buffer of the rounded size is free, else an mmap + mlock.
  // Throws std::invalid_argument for 0 bytes and std::runtime_error (one
  // line: requested, capacity, in use) when it cannot fit the capacity.
  HostBuffer allocate(uint64_t bytes);

  // Unmaps every cached (free) buffer.
  void trim();

  HostPoolStats stats() const;
  // The driver's reason for the last mapping it refused to register ("" if none).
  std::string registration_error() const;

 private:
  friend class HostBuffer;
  void release(void* data, uint64_t size);
  void unmap_locked(void* data);
  bool evict_for_locked(uint64_t bytes);

  const uint64_t capacity_;
  const bool pin_;
  const std::shared_ptr<HostRegistrar> registrar_;
  mutable std::mutex mutex_;
  struct Mapping {
    uint64_t size = 0;
    bool pinned = false;      // page-locked
    bool registered = false;  // by registrar_
  };
  std::string registration_error_;
  std::multimap<uint64_t, void*> cached_;  // rounded size -> free buffers
  std::map<void*, Mapping> mapped_;        // every buffer mapped, free or not
  HostPoolStats stats_;
};

}  // namespace memwall::runtime
