// The "plan" policy: every request has a fixed offset in one arena, decided
// ahead of time by a static layout (src/layout, a plan's "offsets").
//
// Note [Plan-driven allocation]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A static layout (TFLite/XLA style) has already solved fragmentation
// offline, so at run time the allocator only has to trust it - and check it:
// a request whose tag has no offset, ends past the arena or overlaps a live
// block is a bug in the plan (or a plan replayed against the wrong schedule)
// and throws Error instead of silently corrupting a neighbour. Checking
// overlap costs O(log live) with the live blocks ordered by offset. The arena
// is mapped on the first request (so an unused allocator holds nothing) and
// released by empty_cache once nothing is live; if the device cannot hold
// it, the request is an out-of-memory result like any other policy's.
#include <map>

#include "node_recycler.h"
#include "policies.h"

namespace memwall::alloc {
namespace {

class PlanAllocator final : public Allocator {
 public:
  PlanAllocator(Device& device, const Options& options)
      : Allocator("plan", device),
        arena_bytes_(options.arena_bytes),
        mapped_bytes_(round_up(options.arena_bytes, device.granularity())),
        offsets_(options.offsets) {}

  ~PlanAllocator() override { release_arena(); }

 private:
  struct Live {
    uint64_t bytes = 0;
    uint64_t tag = 0;
  };

  Allocation do_allocate(uint64_t bytes, StreamId /*stream*/, uint64_t tag) override {
    if (tag == kNoTag) throw Error("plan: allocate needs the request's tag (its id in the plan)");
    const auto offset_of = offsets_.find(tag);
    if (offset_of == offsets_.end()) {
      throw Error("plan: request " + std::to_string(tag) + " has no offset in the plan");
    }
    const uint64_t offset = offset_of->second;
    if (offset > arena_bytes_ || bytes > arena_bytes_ - offset) {
      throw Error("plan: request " + std::to_string(tag) + " of " + std::to_string(bytes) +
                  " bytes at offset " + std::to_string(offset) + " ends past the arena of " +
                  std::to_string(arena_bytes_) + " bytes");
    }
    check_no_overlap(tag, offset, bytes);
    if (chunks_.empty() && !map_arena()) return {};
    auto node = live_nodes_.take();
    if (node.empty()) {
      live_.emplace(offset, Live{bytes, tag});
    } else {
      node.key() = offset;
      node.mapped() = Live{bytes, tag};
      live_.insert(std::move(node));
    }
    return {reinterpret_cast<void*>(base_ + offset), bytes, false};
  }

  void check_no_overlap(uint64_t tag, uint64_t offset, uint64_t bytes) const {
    auto after = live_.lower_bound(offset);
    const Live* clash = nullptr;
    uint64_t clash_offset = 0;
    if (after != live_.end() && after->first < offset + bytes) {
      clash = &after->second;
      clash_offset = after->first;
    } else if (after != live_.begin()) {
      auto before = std::prev(after);
      if (before->first + before->second.bytes > offset) {
        clash = &before->second;
        clash_offset = before->first;
      }
    }
    if (clash == nullptr) return;
    throw Error("plan: request " + std::to_string(tag) + " at [" + std::to_string(offset) + ", " +
                std::to_string(offset + bytes) + ") overlaps live request " +
                std::to_string(clash->tag) + " at [" + std::to_string(clash_offset) + ", " +
                std::to_string(clash_offset + clash->bytes) + ")");
  }

  Freed do_free(void* ptr) override {
    const auto address = reinterpret_cast<uintptr_t>(ptr);
    const bool inside = !chunks_.empty() && address >= base_ && address < base_ + arena_bytes_;
    auto it = inside ? live_.find(address - base_) : live_.end();
    if (it == live_.end()) {
      throw Error("plan: free of " + hex_address(address) +
                  (inside ? ", which is not a live allocation (double free or interior pointer)"
                          : ", which this allocator did not allocate (foreign pointer)"));
    }
    const Freed freed{it->second.bytes, it->second.bytes};
    live_nodes_.give(live_.extract(it));
    return freed;
  }

  uint64_t do_cached_bytes() const override {
    return chunks_.empty() ? 0 : mapped_bytes_ - current_stats().allocated_bytes;
  }

  void do_empty_cache() override {
    if (live_.empty()) release_arena();
  }

  // All or nothing: the arena counts as mapped (chunks_ not empty) only
  // once every run is.
  bool map_arena() {
    std::vector<ChunkRun> chunks;
    if (!create_chunks(mapped_bytes_ / granularity(), chunks)) return false;
    try {
      base_ = reserve_range(mapped_bytes_);
    } catch (...) {
      for (const ChunkRun& run : chunks) release_chunks(run);
      throw;
    }
    uint64_t offset = 0;
    try {
      for (const ChunkRun& run : chunks) {
        map_chunks(base_ + offset, run);
        offset += run.count * granularity();
      }
    } catch (...) {
      if (offset != 0) unmap_range(base_, offset);
      for (const ChunkRun& run : chunks) release_chunks(run);
      unreserve_range(base_, mapped_bytes_);
      throw;
    }
    chunks_ = std::move(chunks);
    return true;
  }

  void release_arena() {
    if (chunks_.empty()) return;
    unmap_range(base_, mapped_bytes_);
    for (const ChunkRun& run : chunks_) release_chunks(run);
    chunks_.clear();
    unreserve_range(base_, mapped_bytes_);
    base_ = 0;
  }

  std::vector<SnapshotSegment> do_snapshot() const override {
    if (chunks_.empty()) return {};
    SnapshotSegment arena{base_, mapped_bytes_, mapped_bytes_, 0, PoolKind::large, {}};
    for (const auto& [offset, live] : live_) {
      arena.blocks.push_back({base_ + offset, live.bytes, live.bytes, true});
    }
    return {arena};
  }

  void do_audit() const override {
    uint64_t allocated = 0;
    uint64_t end = 0;
    for (const auto& [offset, live] : live_) {
      if (offset < end) throw Error("plan: audit: live requests overlap");
      end = offset + live.bytes;
      allocated += live.bytes;
    }
    const Stats& stats = current_stats();
    if (end > arena_bytes_ || allocated != stats.allocated_bytes ||
        live_.size() != stats.live_allocations ||
        stats.reserved_bytes != (chunks_.empty() ? 0 : mapped_bytes_)) {
      throw Error("plan: audit: byte counts disagree");
    }
  }

  uint64_t arena_bytes_;
  uint64_t mapped_bytes_;
  std::unordered_map<uint64_t, uint64_t> offsets_;
  uintptr_t base_ = 0;
  std::vector<ChunkRun> chunks_;   // the arena's, in address order
  std::map<uint64_t, Live> live_;  // by offset
  NodeRecycler<std::map<uint64_t, Live>> live_nodes_;
};

}  // namespace

std::unique_ptr<Allocator> make_plan_allocator(Device& device, const Options& options) {
  if (options.arena_bytes == 0) throw Error("plan: Options::arena_bytes must be positive");
  if (options.arena_bytes > kMaxRequestBytes) throw Error("plan: arena larger than 2^62 bytes");
  return std::make_unique<PlanAllocator>(device, options);
}

}  // namespace memwall::alloc
