// Space management for the NVMe engine: each tensor gets one contiguous run
// of blocks (an extent) out of [0, total_blocks). First fit over a free list
// kept sorted by start, merged with its neighbours on free. Not thread-safe
// (the engine guards it).
#pragma once

#include <cstdint>
#include <map>
#include <optional>

namespace memwall::runtime {

class ExtentAllocator {
 public:
  explicit ExtentAllocator(uint64_t total_blocks);

  // The first block of `blocks` free contiguous blocks, or nullopt.
  std::optional<uint64_t> allocate(uint64_t blocks);
  // Returns [first, first + blocks); throws std::logic_error if any of it
  // is already free or out of range (a double free).
  void free(uint64_t first, uint64_t blocks);

  uint64_t total_blocks() const { return total_; }
  uint64_t free_blocks() const { return free_; }
  uint64_t largest_free_run() const;

 private:
  uint64_t total_;
  uint64_t free_;
  std::map<uint64_t, uint64_t> runs_;  // start -> length, disjoint, not adjacent
};

}  // namespace memwall::runtime
