#include "memwall/runtime/extent_allocator.h"

#include <stdexcept>
#include <string>

namespace memwall::runtime {

ExtentAllocator::ExtentAllocator(uint64_t total_blocks)
    : total_(total_blocks), free_(total_blocks) {
  if (total_blocks > 0) runs_.emplace(0, total_blocks);
}

std::optional<uint64_t> ExtentAllocator::allocate(uint64_t blocks) {
  if (blocks == 0) return std::nullopt;
  for (auto it = runs_.begin(); it != runs_.end(); ++it) {
    if (it->second < blocks) continue;
    uint64_t first = it->first;
    uint64_t rest = it->second - blocks;
    runs_.erase(it);
    if (rest > 0) runs_.emplace(first + blocks, rest);
    free_ -= blocks;
    return first;
  }
  return std::nullopt;
}

void ExtentAllocator::free(uint64_t first, uint64_t blocks) {
  if (blocks == 0) return;
  if (first >= total_ || blocks > total_ - first) {
    throw std::logic_error("nvme: extent [" + std::to_string(first) + ", +" +
                           std::to_string(blocks) + ") out of range");
  }
  auto next = runs_.lower_bound(first);
  bool overlaps_next = next != runs_.end() && next->first < first + blocks;
  bool overlaps_prev = false;
  if (next != runs_.begin()) {
    auto prev = std::prev(next);
    overlaps_prev = prev->first + prev->second > first;
  }
  if (overlaps_next || overlaps_prev) {
    throw std::logic_error("nvme: extent [" + std::to_string(first) + ", +" +
                           std::to_string(blocks) + ") freed twice");
  }
  uint64_t start = first;
  uint64_t length = blocks;
  if (next != runs_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == first) {
      start = prev->first;
      length += prev->second;
      runs_.erase(prev);
    }
  }
  if (next != runs_.end() && next->first == first + blocks) {
    length += next->second;
    runs_.erase(next);
  }
  runs_.emplace(start, length);
  free_ += blocks;
}

uint64_t ExtentAllocator::largest_free_run() const {
  uint64_t best = 0;
  for (const auto& [start, length] : runs_) best = std::max(best, length);
  return best;
}

}  // namespace memwall::runtime
