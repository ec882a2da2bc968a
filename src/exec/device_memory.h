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
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include <c10/core/Allocator.h>

#include "arena.h"
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

  // Makes this allocator PyTorch's CPU allocator until the guard ends;
  // nothing for nullptr (a CUDA run's, Note [The CUDA run]).
  class Installed {
   public:
    explicit Installed(DeviceMemory* memory);
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

  // Note [Plan offsets at run time]: device memory is one arena of
  // `bytes`, buffers at their offsets. expect() names the current op's
  // outputs in the order it returns them, and its workspace (offset,
  // bytes; 0 bytes: none), where its other allocations go first;
  // allocate_at places a buffer the executor makes itself. Both throw
  // c10::OutOfMemoryError on a conflict.
  // Note [Scratch before its output]: allocations of an output's size
  // that go elsewhere before one takes its offset, the first of them to
  // `aside` when that is free.
  struct ScratchFirst {
    uint32_t skip = 0;
    std::optional<uint64_t> aside;
    bool from_rules = false;  // the trace's (Op::scratch_first), not learnt in a step
  };
  struct ExpectedOutput {
    uint64_t offset = 0, bytes = 0;
    ScratchFirst scratch;
  };
  void use_arena(uint64_t bytes);
  bool has_arena() const { return arena_ != nullptr; }
  // `scratch_at`: Note [Scratch offsets] (Op::scratch_at).
  void expect(std::vector<ExpectedOutput> outputs, std::pair<uint64_t, uint64_t> workspace = {0, 0},
              std::span<const uint64_t> scratch_at = {});
  // The call is over: nothing reserved any more (its allocations are
  // remembered until the next expect()).
  void end_call();
  // Note [Scratch before its output]: how many allocations of `bytes`
  // since expect() came before the one at `ptr`, and where in the arena
  // `ptr` is (nullopt: not one of them).
  std::optional<ScratchFirst> scratch_before(const void* ptr, uint64_t bytes) const;
  c10::DataPtr allocate_at(uint64_t offset, uint64_t bytes);
  bool range_free(uint64_t offset, uint64_t bytes) const;  // in the arena
  // Anywhere clear of the expected outputs and the workspace (plain
  // allocate() without an arena).
  c10::DataPtr allocate_aside(size_t bytes);
  uint64_t arena_high_water() const;  // since reset_peak
  // Where `offset` of the arena is (nullptr without one).
  const void* arena_address(uint64_t offset) const {
    return arena_ == nullptr ? nullptr : arena_->address(offset);
  }
  // While on, requests go to the host allocator: a host compute step's
  // kernels make host tensors (set by the one thread that issues steps).
  void set_host_mode(bool on) { host_mode_.store(on); }
  // Debugging the model of kernels' scratch: while set, every device
  // allocation ("+ ADDRESS BYTES") and free ("- ADDRESS") is written to
  // `log` (nullptr: none). The caller keeps the file open while set.
  void log_allocations(std::FILE* log);

 private:
  void note_allocated(void* ptr, uint64_t bytes, uint64_t allocated);  // under mutex_
  bool clear_of_outputs(uint64_t offset, uint64_t bytes) const;        // under mutex_
  // The running op's output ranges, and its workspace (under mutex_).
  std::vector<std::pair<uint64_t, uint64_t>> reserved_ranges(bool with_workspace) const;
  struct Sizes {
    uint64_t bytes = 0, allocated = 0;
  };
  static void release(void* ptr);
  c10::DataPtr allocate_host(size_t bytes);  // Note [Host step memory]
  static void release_host(void* ptr);

  alloc::Allocator& allocator_;
  uint64_t budget_;
  c10::Allocator* host_;  // PyTorch's CPU allocator before ours
  mutable std::mutex mutex_;
  std::atomic<bool> host_mode_{false};
  std::unique_ptr<Arena> arena_;
  struct Expected {
    ExpectedOutput output;
    uint32_t skipped = 0;
    bool taken = false;
  };
  std::vector<Expected> expected_;                              // the running op's outputs
  std::vector<std::pair<const void*, uint64_t>> since_expect_;  // allocations, in order
  std::pair<uint64_t, uint64_t> workspace_{0, 0};               // the running op's (offset, bytes)
  std::vector<std::pair<uint64_t, uint64_t>> scratch_at_;       // Note [Scratch offsets]
  std::vector<bool> scratch_used_;
  std::vector<void*> unknown_live_;  // scratch the rules do not know, live in this call
  static constexpr uint64_t kSmallScratch = 64 << 10;  // Note [Scratch in the workspace]
  std::unordered_map<void*, Sizes> blocks_;
  std::unordered_map<void*, uint64_t> host_blocks_;      // host-mode blocks in use
  std::unordered_multimap<uint64_t, void*> host_cache_;  // freed ones, by size
  uint64_t live_ = 0, live_allocated_ = 0, peak_ = 0, peak_allocated_ = 0;
  std::FILE* log_ = nullptr;  // log_allocations
};

}  // namespace memwall::exec
