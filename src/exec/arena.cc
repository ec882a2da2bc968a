#include "arena.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace memwall::exec {

Arena::Arena(uint64_t bytes) : size_(bytes) {
  if (bytes == 0) return;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    throw std::runtime_error("cannot map an arena of " + std::to_string(bytes) +
                             " bytes: " + std::strerror(errno));
  }
  base_ = static_cast<char*>(p);
  gaps_[0] = bytes;
}

Arena::~Arena() {
  if (base_ != nullptr) ::munmap(base_, size_);
}

// Note [Arena gaps]
// ~~~~~~~~~~~~~~~~~
// A kernel's small scratch is placed at the lowest free range clear of the
// op's outputs (place_anywhere), a few times per op. Under a keep-all plan
// the arena holds every activation: ~1,700 live ranges on MobileNetV2 b8.
// Collecting and sorting every live range's end per call made MobileNetV2's
// keep-all kernels 35% slower than the same plan without offsets (63 vs 47
// ms a step; perf: the sort, the tree walk and free_range were 11% of the
// run). The free ranges, kept as their own map, are walked instead, lowest
// first, up to the first that holds the scratch: in a tight layout that is
// one of the first few. The placement is the same: the lowest start clear
// of live and reserved ranges is a gap's start or a reserved range's end.

bool Arena::free_range(uint64_t offset, uint64_t bytes) const {
  if (offset > size_ || bytes > size_ - offset) return false;
  auto gap = gaps_.upper_bound(offset);
  if (gap == gaps_.begin()) return false;
  gap = std::prev(gap);  // the gap at or below offset
  return offset + bytes <= gap->first + gap->second;
}

void Arena::take_from_gap(uint64_t offset, uint64_t bytes) {
  const auto gap = std::prev(gaps_.upper_bound(offset));  // free_range found it
  const uint64_t start = gap->first;
  const uint64_t end = gap->first + gap->second;
  gaps_.erase(gap);
  if (start < offset) gaps_[start] = offset - start;
  if (offset + bytes < end) gaps_[offset + bytes] = end - offset - bytes;
}

void Arena::return_to_gaps(uint64_t offset, uint64_t bytes) {
  uint64_t start = offset;
  uint64_t end = offset + bytes;
  auto next = gaps_.lower_bound(offset);
  if (next != gaps_.end() && next->first == end) {
    end += next->second;
    next = gaps_.erase(next);
  }
  if (next != gaps_.begin()) {
    const auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      gaps_.erase(prev);
    }
  }
  gaps_[start] = end - start;
}

std::optional<void*> Arena::place_at(uint64_t offset, uint64_t bytes) {
  if (bytes == 0) bytes = 1;  // a distinct address all the same
  if (!free_range(offset, bytes)) return std::nullopt;
  take_from_gap(offset, bytes);
  live_[offset] = bytes;
  high_ = std::max(high_, offset + bytes);
  return base_ + offset;
}

std::optional<void*> Arena::place_anywhere(
    uint64_t bytes, const std::vector<std::pair<uint64_t, uint64_t>>& reserved) {
  if (bytes == 0) bytes = 1;
  // Note [Arena gaps]: O(gaps below the one used + reserved^2); an op
  // reserves its few outputs and its workspace.
  for (const auto& [gap, gap_bytes] : gaps_) {
    if (gap_bytes < bytes) continue;
    const uint64_t end = gap + gap_bytes;
    uint64_t s = gap;
    // Past every reserved range in the way, until a start is clear of all
    // (s only grows; the sums stay within the arena's size).
    for (bool moved = true; moved && s + bytes <= end;) {
      moved = false;
      for (const auto& [o, b] : reserved) {
        if (s < o + b && o < s + bytes) {
          s = o + b;
          moved = true;
        }
      }
    }
    if (s + bytes <= end) return place_at(s, bytes);
  }
  return std::nullopt;
}

std::optional<void*> Arena::place_within(uint64_t lo, uint64_t hi, uint64_t bytes, uint64_t align) {
  if (bytes == 0) bytes = 1;
  hi = std::min(hi, size_);
  const auto up = [&](uint64_t x) { return (x + align - 1) & ~(align - 1); };
  // Each try that fails moves past the live range in the way: O(live ranges
  // in [lo, hi) x log), and an op's workspace holds a few scratch buffers.
  for (uint64_t s = up(lo); s < hi && bytes <= hi - s;) {
    if (free_range(s, bytes)) return place_at(s, bytes);
    auto next = live_.lower_bound(s);
    if (next != live_.begin() && std::prev(next)->first + std::prev(next)->second > s) {
      next = std::prev(next);  // begins below s and reaches into it
    }
    s = up(next->first + next->second);
  }
  return std::nullopt;
}

uint64_t Arena::release(void* ptr) {
  if (!owns(ptr)) return 0;
  const auto it = live_.find(static_cast<uint64_t>(static_cast<char*>(ptr) - base_));
  if (it == live_.end()) return 0;
  const uint64_t bytes = it->second;
  return_to_gaps(it->first, bytes);
  live_.erase(it);
  return bytes;
}

std::string Arena::overlapping(uint64_t offset, uint64_t bytes) const {
  std::string out;
  for (const auto& [o, b] : live_) {
    if (o < offset + bytes && offset < o + b) {
      out += fmt::format("{}[{}, {})", out.empty() ? "" : " ", o, o + b);
    }
  }
  return out;
}

bool Arena::owns(const void* ptr) const {
  const char* p = static_cast<const char*>(ptr);
  return base_ != nullptr && p >= base_ && p < base_ + size_;
}

void Arena::reset_high_water() {
  high_ = 0;
  for (const auto& [o, b] : live_) high_ = std::max(high_, o + b);
}

}  // namespace memwall::exec
