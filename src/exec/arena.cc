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
}

Arena::~Arena() {
  if (base_ != nullptr) ::munmap(base_, size_);
}

bool Arena::free_range(uint64_t offset, uint64_t bytes) const {
  if (offset > size_ || bytes > size_ - offset) return false;
  auto next = live_.lower_bound(offset);
  if (next != live_.end() && next->first < offset + bytes) return false;
  if (next != live_.begin()) {
    const auto prev = std::prev(next);
    if (prev->first + prev->second > offset) return false;
  }
  return true;
}

std::optional<void*> Arena::place_at(uint64_t offset, uint64_t bytes) {
  if (bytes == 0) bytes = 1;  // a distinct address all the same
  if (!free_range(offset, bytes)) return std::nullopt;
  live_[offset] = bytes;
  high_ = std::max(high_, offset + bytes);
  return base_ + offset;
}

std::optional<void*> Arena::place_anywhere(
    uint64_t bytes, const std::vector<std::pair<uint64_t, uint64_t>>& reserved) {
  if (bytes == 0) bytes = 1;
  // Candidate starts: 0 and the end of every live or reserved range, lowest
  // first. O((live + reserved) log) per call; ops hold few live ranges.
  std::vector<uint64_t> starts = {0};
  for (const auto& [o, b] : live_) starts.push_back(o + b);
  for (const auto& [o, b] : reserved) starts.push_back(o + b);
  std::sort(starts.begin(), starts.end());
  for (const uint64_t s : starts) {
    const bool clear = std::none_of(reserved.begin(), reserved.end(), [&](const auto& r) {
      return s < r.first + r.second && r.first < s + bytes;
    });
    if (clear && free_range(s, bytes)) return place_at(s, bytes);
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
