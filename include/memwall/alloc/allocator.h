// memwall's runtime allocator: one interface, four policies, one device.
//
//   auto device = make_host_vmm(8 << 30);                 // or make_sim_device / make_cuda_vmm
//   auto a = make_allocator("stitching", *device, {});    // policy_names() lists them
//   Allocation x = a->allocate(3 << 20, /*stream=*/0);
//   if (!x) { /* x.out_of_memory: the device is full even after emptying the cache */ }
//   a->free(x.ptr);
//   Stats s = a->stats();  std::string json = a->snapshot_json();
//
// Policies (docs/alloc.md):
//   "caching"     PyTorch's CUDACachingAllocator rules (rules.h): 512-byte
//                 rounding, small/large pools, best fit by (stream, size,
//                 address), splitting, max_split_size, merging, per-stream
//                 pools, on OOM release cached segments and retry.
//   "expandable"  one growable range per (stream, pool), grown by mapping
//                 chunks at its end (PyTorch's expandable_segments).
//   "stitching"   expandable's placement, but free blocks give their whole
//                 chunks to the blocks being handed out, which map them
//                 contiguously; new chunks only for the shortfall (Note
//                 [Stitching], after GMLake).
//   "plan"        fixed offsets in one arena from a static layout
//                 (Options::arena_bytes, Options::offsets, request tag = key).
//
// Contract shared by every policy:
//   - allocate(0) returns {nullptr, 0, out_of_memory=false}; free(nullptr) does
//     nothing (PyTorch's allocators do the same for empty tensors).
//   - A request above kMaxRequestBytes throws Error; one the device cannot hold
//     (even after releasing the cache) returns out_of_memory=true, counts an
//     OOM event and leaves the allocator unchanged otherwise.
//   - free() of a pointer that is not a live allocation (double free, interior
//     or foreign pointer) throws Error and changes nothing.
//   - Every public member is thread-safe: one mutex per allocator (an
//     uncontended lock/unlock pair costs ~20 ns of the fast path; contended
//     threads serialize, as PyTorch's allocator does per device).
//   - The allocator must be destroyed before its device; destruction releases
//     every chunk and range it holds, live or not.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "memwall/alloc/device.h"
#include "memwall/alloc/error.h"
#include "memwall/alloc/rules.h"

namespace memwall::alloc {

using StreamId = uint32_t;
inline constexpr uint64_t kNoTag = UINT64_MAX;

struct Options {
  // PyTorch's max_split_size_mb in bytes: blocks this size or larger are never
  // split, and a request takes such a block only if it wastes < kLargeBuffer.
  // Used by "caching".
  uint64_t max_split_size = kNoSplitLimit;
  // "plan": the arena's size and each request tag's offset in it.
  uint64_t arena_bytes = 0;
  std::unordered_map<uint64_t, uint64_t> offsets;
};

struct Allocation {
  void* ptr = nullptr;
  uint64_t block_bytes = 0;  // bytes set aside for it (after rounding)
  bool out_of_memory = false;
  explicit operator bool() const { return ptr != nullptr; }
};

// Byte counts are of physical memory unless named otherwise.
struct Stats {
  uint64_t requested_bytes = 0;  // sum of live requests as asked for
  uint64_t peak_requested_bytes = 0;
  uint64_t allocated_bytes = 0;  // sum of live blocks (requests after rounding)
  uint64_t peak_allocated_bytes = 0;
  uint64_t reserved_bytes = 0;  // physical chunks held (created, not released)
  // Reserved bytes in no live block (free blocks of the cache, the unused
  // part of a plan's arena). Kept apart from the chunk count, so that
  // allocated_bytes + cached_bytes == reserved_bytes checks both.
  uint64_t cached_bytes = 0;
  uint64_t peak_reserved_bytes = 0;
  // The largest allocated_bytes seen while reserved_bytes was at its peak.
  uint64_t allocated_at_peak_reserved = 0;
  uint64_t chunks_created = 0;  // chunks of one granule each, however many per device call
  uint64_t chunks_released = 0;
  uint64_t segments_created = 0;  // virtual ranges reserved (cudaMalloc calls in PyTorch)
  uint64_t segments_released = 0;
  uint64_t maps = 0;           // chunk maps (a run of n chunks counts n)
  uint64_t unmaps = 0;         // unmap calls (one per contiguous range)
  uint64_t stitches = 0;       // allocations backed by chunks moved from free blocks
  uint64_t cache_flushes = 0;  // releases of cached memory (empty_cache and OOM retries)
  uint64_t oom_events = 0;
  uint64_t alloc_calls = 0;  // allocate() calls, including size 0 and OOM
  uint64_t free_calls = 0;   // successful free() calls of non-null pointers
  uint64_t live_allocations = 0;

  // 1 - allocated/reserved at the reserved peak: the share of the peak's
  // physical memory that held no live block. 0 when nothing was reserved.
  double fragmentation() const;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // `stream` selects the per-stream pool; `tag` is the request's key for "plan"
  // (ignored by the others).
  Allocation allocate(uint64_t bytes, StreamId stream = 0, uint64_t tag = kNoTag);
  void free(void* ptr);
  // Returns cached (free) physical memory to the device.
  void empty_cache();
  Stats stats() const;
  // stats().reserved_bytes at the cost of a lock (stats() also counts the
  // cache's free blocks).
  uint64_t reserved_bytes() const;
  // {"policy", "device", "granularity", "capacity", "stats": {...},
  //  "segments": [{"address", "virtual_bytes", "mapped_bytes", "stream", "pool",
  //                "blocks": [{"address", "bytes", "requested", "allocated"}]}]}
  std::string snapshot_json() const;
  // Checks every internal invariant (blocks tile the mapped memory, pools
  // hold exactly the free blocks, byte counts add up); throws Error naming
  // the first violation. O(blocks); for tests.
  void audit() const;

  std::string_view policy() const { return policy_; }
  const Device& device() const { return device_; }

 protected:
  struct Freed {
    uint64_t block_bytes = 0;
    uint64_t requested = 0;
  };
  struct SnapshotBlock {
    uintptr_t address = 0;
    uint64_t bytes = 0;
    uint64_t requested = 0;
    bool allocated = false;
  };
  struct SnapshotSegment {
    uintptr_t address = 0;
    uint64_t virtual_bytes = 0;
    uint64_t mapped_bytes = 0;
    StreamId stream = 0;
    PoolKind pool = PoolKind::large;
    std::vector<SnapshotBlock> blocks;
  };

  Allocator(std::string_view policy, Device& device);

  // Called under the lock with 0 < bytes <= kMaxRequestBytes. Returns an
  // allocation with ptr == nullptr on out-of-memory after any retries.
  virtual Allocation do_allocate(uint64_t bytes, StreamId stream, uint64_t tag) = 0;
  // Throws Error (without changing anything) when ptr is not live.
  virtual Freed do_free(void* ptr) = 0;
  virtual void do_empty_cache() = 0;
  virtual std::vector<SnapshotSegment> do_snapshot() const = 0;
  virtual void do_audit() const = 0;
  virtual uint64_t do_cached_bytes() const = 0;

  // Device calls that keep the statistics; policies use only these. Chunks
  // come and go in runs (Note [Chunk runs]) but are counted one by one.
  uintptr_t reserve_range(uint64_t bytes);
  void unreserve_range(uintptr_t base, uint64_t bytes);
  // `count` chunks appended to `runs`, or false (nothing created) when the
  // device has fewer left.
  bool create_chunks(uint64_t count, std::vector<ChunkRun>& runs);
  void release_chunks(ChunkRun run);
  void map_chunks(uintptr_t address, ChunkRun run);
  void unmap_range(uintptr_t address, uint64_t bytes);
  uint64_t granularity() const { return granularity_; }
  // Chunks the device could still create.
  uint64_t device_headroom_chunks() const;
  void count_stitch() { ++stats_.stitches; }
  void count_cache_flush() { ++stats_.cache_flushes; }
  const Stats& current_stats() const { return stats_; }

  Device& device_;

 private:
  std::string policy_;
  uint64_t granularity_;
  Stats stats_;
  mutable std::mutex mutex_;
};

// "caching", "expandable", "stitching", "plan".
std::span<const std::string_view> policy_names();

// Throws Error for an unknown policy name (listing the known ones) and for
// options a policy cannot use (e.g. "plan" without arena_bytes).
std::unique_ptr<Allocator> make_allocator(std::string_view policy, Device& device,
                                          const Options& options = {});

}  // namespace memwall::alloc
