// The layout validator (problem.h): per-buffer checks, then one sweep over
// time that keeps the address ranges of the live buffers in an ordered map.
// A new buffer can only overlap its two neighbours in that map, because the
// ranges already there are disjoint (the sweep stops at the first overlap):
// O(n log n) in all.
#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "memwall/graph/types.h"
#include "memwall/layout/problem.h"
#include "time_order.h"

namespace memwall {
namespace {

std::string describe(const LayoutBuffer& b, uint64_t offset) {
  return fmt::format("{} (live [{}, {}), bytes [{}, {}))", b.id, b.lower, b.upper, offset,
                     offset + b.size);
}

// Address ranges of live buffers by offset; never two overlapping ones.
using LiveRanges = std::map<uint64_t, uint32_t>;

std::optional<std::string> find_overlap(const LayoutProblem& problem,
                                        const std::vector<uint64_t>& offsets) {
  const auto& buffers = problem.buffers;
  const detail::TimeOrder order = detail::time_order(problem);
  const auto end_of = [&](uint32_t i) { return offsets[i] + buffers[i].size; };
  // Empty buffers and empty lifetimes occupy nothing (only an invalid problem has them).
  const auto occupies = [&](uint32_t i) {
    return buffers[i].size > 0 && buffers[i].lower < buffers[i].upper;
  };
  LiveRanges live;
  size_t next_end = 0;
  for (const uint32_t i : order.by_lower) {
    if (!occupies(i)) continue;
    for (; next_end < order.by_upper.size(); ++next_end) {
      const uint32_t e = order.by_upper[next_end];
      if (buffers[e].upper > buffers[i].lower) break;
      const auto it = live.find(offsets[e]);
      if (it != live.end() && it->second == e) live.erase(it);
    }
    const uint64_t offset = offsets[i];
    const auto above = live.lower_bound(offset);
    if (above != live.begin()) {
      const uint32_t j = std::prev(above)->second;
      if (end_of(j) > offset) {
        return fmt::format("layout: buffers {} and {} overlap", describe(buffers[j], offsets[j]),
                           describe(buffers[i], offset));
      }
    }
    if (above != live.end() && above->first < end_of(i)) {
      const uint32_t j = above->second;
      return fmt::format("layout: buffers {} and {} overlap", describe(buffers[j], offsets[j]),
                         describe(buffers[i], offset));
    }
    live.emplace_hint(above, offset, i);
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> check_layout(const LayoutProblem& problem, const Layout& layout) {
  const auto& buffers = problem.buffers;
  const auto& offsets = layout.offsets;
  if (offsets.size() != buffers.size()) {
    return fmt::format("layout: {} offsets for {} buffers", offsets.size(), buffers.size());
  }
  const uint64_t alignment = problem.alignment == 0 ? 1 : problem.alignment;
  uint64_t arena = 0;
  size_t top = 0;  // a buffer ending at the arena
  for (size_t i = 0; i < buffers.size(); ++i) {
    const LayoutBuffer& b = buffers[i];
    // Both at most 2^62 keeps every end below 2^63: no wrap-around below.
    if (offsets[i] > kMaxBytes || b.size > kMaxBytes) {
      return fmt::format("layout: buffer {} at offset {} with size {} is beyond 2^62 bytes", b.id,
                         offsets[i], b.size);
    }
    if (offsets[i] % alignment != 0) {
      return fmt::format("layout: buffer {} at offset {} is not a multiple of the alignment {}",
                         b.id, offsets[i], alignment);
    }
    if (offsets[i] + b.size > arena) {
      arena = offsets[i] + b.size;
      top = i;
    }
  }
  if (layout.arena != arena) {
    return fmt::format("layout: arena is {} but the buffers end at {}", layout.arena, arena);
  }
  if (problem.capacity != 0 && arena > problem.capacity) {
    return fmt::format("layout: arena {} exceeds the capacity {} (buffer {} ends at {})", arena,
                       problem.capacity, buffers[top].id, arena);
  }
  return find_overlap(problem, offsets);
}

}  // namespace memwall
