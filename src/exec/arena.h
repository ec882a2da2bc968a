// Note [Plan offsets at run time]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A plan with `offsets` (memwall plan --out, memwall layout --plan) pins
// each device stay of a buffer to an address in an arena of the plan's
// budget (Note [Offsets per stay] in plan.h), and each op's workspace. The
// executor then gives the emulated device that arena instead of the
// stitching allocator: a stay it creates (a binding, a swap-in, a version's
// copy) goes to its offset, and a tensor a kernel allocates goes to the
// offset of an output of the op of that size whose range is free, anything
// else (its scratch) to the op's workspace or, when that is full, to the
// lowest gap that is free now and clear of every output's range (Note
// [Scratch in the workspace] in device_memory.cc). A kernel may allocate a
// scratch buffer of its output's size first: when the call returns, an
// output not at its offset is moved there (one copy; the scratch is gone by
// then). A placement over live memory fails the run: the layout was not for
// this run. The arena's high-water mark is the measured device memory,
// against the live bytes' peak.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace memwall::exec {

class Arena {
 public:
  explicit Arena(uint64_t bytes);  // mapped, not touched
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // The address of [offset, offset + bytes), now live; nullopt when that
  // range is outside the arena or overlaps live memory.
  std::optional<void*> place_at(uint64_t offset, uint64_t bytes);
  // The lowest free range of `bytes` that avoids `reserved` ranges
  // (offset, bytes); nullopt when none.
  std::optional<void*> place_anywhere(uint64_t bytes,
                                      const std::vector<std::pair<uint64_t, uint64_t>>& reserved);
  // The lowest free range of `bytes` inside [lo, hi), at a multiple of
  // `align` from the arena's start (a power of two); nullopt when none.
  std::optional<void*> place_within(uint64_t lo, uint64_t hi, uint64_t bytes, uint64_t align);
  // Releases what place_* returned; the bytes it held, 0 if not the arena's.
  uint64_t release(void* ptr);
  bool owns(const void* ptr) const;
  // Whether [offset, offset + bytes) is inside the arena and free.
  bool free_range(uint64_t offset, uint64_t bytes) const;
  // "[a, b) [c, d) ...": the live ranges overlapping [offset, offset + bytes).
  std::string overlapping(uint64_t offset, uint64_t bytes) const;

  uint64_t size() const { return size_; }
  const void* address(uint64_t offset) const { return base_ + offset; }
  uint64_t offset_of(const void* ptr) const {
    return static_cast<uint64_t>(static_cast<const char*>(ptr) - base_);
  }
  uint64_t high_water() const { return high_; }  // the highest end placed
  void reset_high_water();                       // to the highest live end

 private:
  void take_from_gap(uint64_t offset, uint64_t bytes);
  void return_to_gaps(uint64_t offset, uint64_t bytes);
  char* base_ = nullptr;
  uint64_t size_ = 0;
  uint64_t high_ = 0;
  std::map<uint64_t, uint64_t> live_;  // offset -> bytes
  // Note [Arena gaps]: the free ranges between live ones, offset -> bytes,
  // none empty, none adjacent (a release merges its neighbours).
  std::map<uint64_t, uint64_t> gaps_;
};

}  // namespace memwall::exec
