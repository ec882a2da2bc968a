// The simulated device: addresses and chunk ids without memory, so a replay
// of an 80 GB training step runs in this process. It checks the map/unmap
// discipline a real driver enforces, which catches policy bugs in tests, and
// one thing a driver allows but no policy may do: mapping a chunk at a second
// place, which would make two blocks share memory. Its bookkeeping is in
// runs (Note [Chunk runs]): a 1 PiB buffer costs what a 2 MiB one does.
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "budgeted_device.h"
#include "chunk_map.h"

namespace memwall::alloc {
namespace {

// The chunks that exist (created, not released), as spans of consecutive
// handles; touching spans are merged.
class LiveChunks {
 public:
  void add(ChunkRun run) {
    ChunkHandle first = run.first;
    ChunkHandle end = run.first + run.count;
    auto next = spans_.lower_bound(first);
    if (next != spans_.end() && next->first == end) {
      end = next->second;
      next = spans_.erase(next);
    }
    if (next != spans_.begin() && std::prev(next)->second == first) {
      std::prev(next)->second = end;
      return;
    }
    spans_.emplace_hint(next, first, end);
  }
  // Every chunk of `run` exists.
  bool contain(ChunkRun run) const {
    if (run.count == 0 || run.first + run.count < run.first) return false;
    auto it = spans_.upper_bound(run.first);
    return it != spans_.begin() && std::prev(it)->second >= run.first + run.count;
  }
  // The run's chunks must exist (contain).
  void remove(ChunkRun run) {
    auto it = std::prev(spans_.upper_bound(run.first));
    const ChunkHandle start = it->first;
    const ChunkHandle end = it->second;
    const ChunkHandle run_end = run.first + run.count;
    if (start < run.first) {
      it->second = run.first;
    } else {
      it = spans_.erase(it);
    }
    if (run_end < end) spans_.emplace_hint(it, run_end, end);
  }

 private:
  std::map<ChunkHandle, ChunkHandle> spans_;  // first -> end
};

class SimDevice final : public BudgetedDevice {
 public:
  SimDevice(uint64_t capacity, uint64_t granularity)
      : BudgetedDevice("sim", capacity, granularity) {}

  std::string_view name() const override { return "sim"; }
  bool host_accessible() const override { return false; }

  uintptr_t reserve(uint64_t bytes) override {
    std::lock_guard lock(mutex_);
    // Fresh addresses every time, with a gap so that ranges are never
    // adjacent (adjacent ranges would hide a policy merging across them).
    const uintptr_t base = next_address_;
    if (base > UINTPTR_MAX - granularity() || bytes > UINTPTR_MAX - granularity() - base) {
      throw Error("sim: address space exhausted (reserving " + std::to_string(bytes) +
                  " bytes at " + hex_address(base) + ")");
    }
    next_address_ += bytes + granularity();
    ranges_.emplace(base, bytes);
    return base;
  }
  void unreserve(uintptr_t base, uint64_t bytes) override {
    std::lock_guard lock(mutex_);
    auto range = ranges_.find(base);
    if (range == ranges_.end() || range->second != bytes) {
      throw Error("sim: unreserve of a range that was not reserved");
    }
    // The last mapping below the range's end, not a walk over its granules:
    // a growable range is reserved at the device's capacity (or more).
    const uint64_t first = base / granularity();
    if (mapped_.mapped_end(first, first + bytes / granularity()) != first) {
      throw Error("sim: unreserve of a range with mapped chunks");
    }
    ranges_.erase(range);
  }

  bool create_chunks(uint64_t count, std::vector<ChunkRun>& runs) override {
    if (count == 0) return true;
    if (!take_budget(count)) return false;
    std::lock_guard lock(mutex_);
    // Released handles first, newest first, then fresh ones in one run.
    while (count != 0 && !free_runs_.empty()) {
      ChunkRun& last = free_runs_.back();
      const uint64_t take = std::min(count, last.count);
      const ChunkRun run{last.first + last.count - take, take};
      last.count -= take;
      if (last.count == 0) free_runs_.pop_back();
      live_.add(run);
      ChunkMap::append(runs, run);
      count -= take;
    }
    if (count != 0) {
      const ChunkRun run{next_chunk_, count};
      next_chunk_ += count;
      live_.add(run);
      ChunkMap::append(runs, run);
    }
    return true;
  }
  void release_chunks(ChunkRun run) override {
    std::lock_guard lock(mutex_);
    if (!live_.contain(run)) throw Error("sim: release of an unknown chunk");
    if (where_.mapped_in(run.first, run.first + run.count) != 0) {
      throw Error("sim: release of a mapped chunk");
    }
    live_.remove(run);
    free_runs_.push_back(run);
    return_budget(run.count);
  }

  void map_chunks(uintptr_t address, ChunkRun run) override {
    std::lock_guard lock(mutex_);
    if (run.count == 0 || run.count > (UINTPTR_MAX - address) / granularity()) {
      throw Error("sim: map of " + std::to_string(run.count) + " chunks");
    }
    check_reserved(address, run.count * granularity());
    if (!live_.contain(run)) throw Error("sim: map of an unknown chunk");
    const uint64_t first = address / granularity();
    if (!mapped_.try_insert(first, run)) throw Error("sim: map over a mapped granule");
    if (!where_.try_insert(run.first, {first, run.count})) {
      std::vector<ChunkRun> undo;
      mapped_.erase(first, first + run.count, undo);
      throw Error("sim: map of a chunk that is mapped elsewhere (memory shared by two blocks)");
    }
  }
  void unmap(uintptr_t address, uint64_t bytes) override {
    std::lock_guard lock(mutex_);
    check_reserved(address, bytes);
    const uint64_t first = address / granularity();
    const uint64_t end = first + bytes / granularity();
    if (mapped_.mapped_in(first, end) != end - first) {
      throw Error("sim: unmap of an unmapped granule");
    }
    unmapped_.clear();
    mapped_.erase(first, end, unmapped_);
    for (const ChunkRun& run : unmapped_) {
      scratch_.clear();
      where_.erase(run.first, run.first + run.count, scratch_);
    }
  }

 private:
  void check_reserved(uintptr_t address, uint64_t bytes) const {
    if (address % granularity() != 0 || bytes % granularity() != 0) {
      throw Error("sim: unaligned map or unmap");
    }
    auto range = ranges_.upper_bound(address);
    if (range == ranges_.begin() ||
        (--range, address - range->first > range->second ||
                      bytes > range->second - (address - range->first))) {
      throw Error("sim: map or unmap outside a reserved range");
    }
  }

  mutable std::mutex mutex_;  // guards everything below
  ChunkHandle next_chunk_ = 0;
  std::vector<ChunkRun> free_runs_;  // released handles, for reuse
  // Start well above zero so no address is null or small.
  uintptr_t next_address_ = uintptr_t{1} << 40;
  std::map<uintptr_t, uint64_t> ranges_;
  ChunkMap mapped_;  // the chunk at each granule (address / granularity)
  // The inverse: the granule each mapped chunk is at, so a release finds a
  // mapping of its chunks in O(log n) and a second mapping is refused.
  ChunkMap where_;
  LiveChunks live_;
  std::vector<ChunkRun> unmapped_, scratch_;  // unmap's, kept for their capacity
};

}  // namespace

std::unique_ptr<Device> make_sim_device(uint64_t capacity, uint64_t granularity) {
  return std::make_unique<SimDevice>(capacity, granularity);
}

}  // namespace memwall::alloc
