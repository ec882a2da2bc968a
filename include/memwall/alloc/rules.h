// PyTorch's CUDA caching allocator size rules (c10/cuda/CUDACachingAllocator.cpp),
// shared by the caching, expandable and stitching policies. Each constant and
// function names its counterpart there; docs/alloc.md explains them.
#pragma once

#include <cstdint>

namespace memwall::alloc {

inline constexpr uint64_t kMiB = uint64_t{1} << 20;

// kMinBlockSize: "all sizes are rounded to at least 512 bytes".
inline constexpr uint64_t kMinBlockSize = 512;
// kSmallSize: "largest 'small' allocation is 1 MiB".
inline constexpr uint64_t kSmallSize = 1 * kMiB;
// kSmallBuffer: "'small' allocations are packed in 2 MiB blocks".
inline constexpr uint64_t kSmallBuffer = 2 * kMiB;
// kLargeBuffer: "allocations between 1 and 10 MiB may use kLargeBuffer" (20 MiB).
inline constexpr uint64_t kLargeBuffer = 20 * kMiB;
// kMinLargeAlloc: "allocations between 1 and 10 MiB may use kLargeBuffer".
inline constexpr uint64_t kMinLargeAlloc = 10 * kMiB;
// kRoundLarge: "round up large allocations to 2 MiB".
inline constexpr uint64_t kRoundLarge = 2 * kMiB;

// No max_split_size: PyTorch's default (max_split_size_mb unset = SIZE_MAX).
inline constexpr uint64_t kNoSplitLimit = UINT64_MAX;

enum class PoolKind : uint8_t { small, large };

constexpr uint64_t round_up(uint64_t value, uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// round_size(): below 512 bytes -> 512, else the next multiple of 512
// (without roundup_power2_divisions). `bytes` <= kMaxRequestBytes.
constexpr uint64_t round_size(uint64_t bytes) {
  return bytes < kMinBlockSize ? kMinBlockSize : round_up(bytes, kMinBlockSize);
}

// get_pool(): rounded sizes up to kSmallSize use the small pool.
constexpr PoolKind pool_for(uint64_t rounded) {
  return rounded <= kSmallSize ? PoolKind::small : PoolKind::large;
}

// get_allocation_size(): the size of a new segment (cudaMalloc) for a
// rounded request: 2 MiB for small, 20 MiB below 10 MiB, else the request
// rounded up to 2 MiB.
constexpr uint64_t segment_size(uint64_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return round_up(rounded, kRoundLarge);
}

// should_split(): a small block splits when at least 512 bytes remain; a
// large block when the request is below max_split_size and more than 1 MiB
// remains. (PyTorch with expandable segments splits large blocks like small
// ones; the expandable policy passes `expandable`.)
constexpr bool should_split(PoolKind pool, uint64_t block_size, uint64_t rounded,
                            uint64_t max_split_size, bool expandable = false) {
  const uint64_t remaining = block_size - rounded;
  if (pool == PoolKind::small || expandable) return remaining >= kMinBlockSize;
  return rounded < max_split_size && remaining > kSmallSize;
}

// get_free_block()'s max_split_size filters on a best-fit candidate: "do not
// return an oversized block for a large request" and "allow oversized block
// size to be rounded up but within a limit" (kLargeBuffer).
constexpr bool oversize_filter_accepts(uint64_t block_size, uint64_t rounded,
                                       uint64_t max_split_size) {
  if (rounded < max_split_size && block_size >= max_split_size) return false;
  if (rounded >= max_split_size && block_size >= rounded + kLargeBuffer) return false;
  return true;
}

}  // namespace memwall::alloc
