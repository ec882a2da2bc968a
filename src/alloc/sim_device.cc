// The simulated device: addresses and chunk ids without memory, so a replay
// of an 80 GB training step runs in this process. It checks the map/unmap
// discipline a real driver enforces, which catches policy bugs in tests.
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "budgeted_device.h"

namespace memwall::alloc {
namespace {

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
    // The first mapping at or after `base`, not a walk over every granule: a
    // growable range is reserved at the device's capacity (or more), which
    // is millions of granules for a large simulated GPU.
    if (auto first = mapped_.lower_bound(base);
        first != mapped_.end() && first->first < base + bytes) {
      throw Error("sim: unreserve of a range with mapped chunks");
    }
    ranges_.erase(range);
  }

  std::optional<ChunkHandle> create_chunk() override {
    if (!take_budget()) return std::nullopt;
    std::lock_guard lock(mutex_);
    ChunkHandle chunk = next_chunk_++;
    if (!free_chunks_.empty()) {
      chunk = free_chunks_.back();
      free_chunks_.pop_back();
    }
    map_count_[chunk] = 0;
    return chunk;
  }
  void release_chunk(ChunkHandle chunk) override {
    std::lock_guard lock(mutex_);
    auto it = map_count_.find(chunk);
    if (it == map_count_.end()) throw Error("sim: release of an unknown chunk");
    if (it->second != 0) throw Error("sim: release of a mapped chunk");
    map_count_.erase(it);
    free_chunks_.push_back(chunk);
    return_budget();
  }

  void map(uintptr_t address, ChunkHandle chunk) override {
    std::lock_guard lock(mutex_);
    check_reserved(address, granularity());
    auto count = map_count_.find(chunk);
    if (count == map_count_.end()) throw Error("sim: map of an unknown chunk");
    if (!mapped_.emplace(address, chunk).second) throw Error("sim: map over a mapped granule");
    ++count->second;
  }
  void unmap(uintptr_t address, uint64_t bytes) override {
    std::lock_guard lock(mutex_);
    check_reserved(address, bytes);
    for (uintptr_t a = address; a < address + bytes; a += granularity()) {
      auto it = mapped_.find(a);
      if (it == mapped_.end()) throw Error("sim: unmap of an unmapped granule");
      --map_count_[it->second];
      mapped_.erase(it);
    }
  }

 private:
  void check_reserved(uintptr_t address, uint64_t bytes) const {
    if (address % granularity() != 0 || bytes % granularity() != 0) {
      throw Error("sim: unaligned map or unmap");
    }
    auto range = ranges_.upper_bound(address);
    if (range == ranges_.begin() || (--range, address + bytes > range->first + range->second)) {
      throw Error("sim: map or unmap outside a reserved range");
    }
  }

  mutable std::mutex mutex_;  // guards everything below
  ChunkHandle next_chunk_ = 0;
  std::vector<ChunkHandle> free_chunks_;
  // Start well above zero so no address is null or small.
  uintptr_t next_address_ = uintptr_t{1} << 40;
  std::map<uintptr_t, uint64_t> ranges_;
  // Ordered, so that unreserve finds a mapping inside a range in O(log n).
  std::map<uintptr_t, ChunkHandle> mapped_;
  std::unordered_map<ChunkHandle, uint64_t> map_count_;
};

}  // namespace

std::unique_ptr<Device> make_sim_device(uint64_t capacity, uint64_t granularity) {
  return std::make_unique<SimDevice>(capacity, granularity);
}

}  // namespace memwall::alloc
