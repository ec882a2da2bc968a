// Note [Emulated device]
// ~~~~~~~~~~~~~~~~~~~~~~
// Without a GPU the executor's device is memory from memwall's allocator
// over the runtime's emulated device (host memory with its own capacity,
// the plan's budget), and its kernels are ATen's CPU kernels: PyTorch's CPU
// allocator is replaced by DeviceMemory for the run, so every tensor a
// kernel makes (outputs and its own temporaries) is device memory, counted
// and refused past the budget as a GPU's would be. Host tiers are the
// runtime's pinned pool and NVMe engine, reached through the copy engine.
// Tensors that stand for host values (wrapped scalars, the generator's
// state) come from PyTorch's own allocator, which DeviceMemory keeps.
#pragma once
#include <cstdint>
#include <atomic>
#include <mutex>
#include <unordered_map>

#include <c10/core/Allocator.h>

#include "memwall/alloc/allocator.h"

namespace memwall::exec {

class DeviceMemory final : public c10::Allocator {
 public:
  DeviceMemory(alloc::Allocator& allocator, uint64_t budget);
  ~DeviceMemory() override;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  // Throws c10::OutOfMemoryError when the allocator cannot serve `bytes`.
  c10::DataPtr allocate(size_t bytes) override;
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override;

  // Makes this allocator PyTorch's CPU allocator until the guard ends.
  class Installed {
   public:
    explicit Installed(DeviceMemory& memory);
    ~Installed();
    Installed(const Installed&) = delete;
    Installed& operator=(const Installed&) = delete;

   private:
    c10::Allocator* previous_;
  };
  c10::Allocator* host_allocator() const { return host_; }

  uint64_t live_bytes() const;
  uint64_t peak_bytes() const;            // live bytes at most since reset_peak
  uint64_t peak_allocated_bytes() const;  // the same after rounding
  void reset_peak();
  void merge_peak(uint64_t peak);  // the peak is at least `peak`
  alloc::Stats stats() const { return allocator_.stats(); }
  uint64_t budget() const { return budget_; }

  // While on, requests go to the host allocator: a host compute step's
  // kernels make host tensors (set by the one thread that issues steps).
  void set_host_mode(bool on) { host_mode_.store(on); }

 private:
  struct Sizes {
    uint64_t bytes = 0, allocated = 0;
  };
  static void release(void* ptr);

  alloc::Allocator& allocator_;
  uint64_t budget_;
  c10::Allocator* host_;  // PyTorch's CPU allocator before ours
  mutable std::mutex mutex_;
  std::atomic<bool> host_mode_{false};
  std::unordered_map<void*, Sizes> blocks_;
  uint64_t live_ = 0, live_allocated_ = 0, peak_ = 0, peak_allocated_ = 0;
};

}  // namespace memwall::exec
