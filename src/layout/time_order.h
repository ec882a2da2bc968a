// Internal: views of a problem's time axis shared by the sweeps (check.cc,
// bounds.cc) and the segment trees (placement.cc, greedy_by_breadth.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "memwall/layout/types.h"

namespace memwall::detail {

// Buffer indices sorted by lower and by upper, the two event lists of a sweep.
// A sweep walks by_lower and, before adding a buffer, drops every buffer whose
// upper is at or below its lower: lifetimes are half-open, so one ending at t
// and one starting at t never meet.
struct TimeOrder {
  std::vector<uint32_t> by_lower;  // ties by index
  std::vector<uint32_t> by_upper;
};

inline TimeOrder time_order(const LayoutProblem& problem) {
  const auto& buffers = problem.buffers;
  TimeOrder order;
  order.by_lower.resize(buffers.size());
  std::iota(order.by_lower.begin(), order.by_lower.end(), uint32_t{0});
  order.by_upper = order.by_lower;
  std::stable_sort(order.by_lower.begin(), order.by_lower.end(),
                   [&](uint32_t a, uint32_t b) { return buffers[a].lower < buffers[b].lower; });
  std::stable_sort(order.by_upper.begin(), order.by_upper.end(),
                   [&](uint32_t a, uint32_t b) { return buffers[a].upper < buffers[b].upper; });
  return order;
}

// The elementary segments of time: the intervals between consecutive distinct
// endpoints, inside which the set of live buffers is constant. Buffer i is
// live exactly on segments [first[i], last[i]). For a valid problem count >= 1
// whenever there are buffers.
struct Segments {
  size_t count = 0;
  std::vector<uint32_t> first, last;
};

inline Segments segments(const LayoutProblem& problem) {
  std::vector<int64_t> times;
  times.reserve(2 * problem.buffers.size());
  for (const LayoutBuffer& b : problem.buffers) {
    times.push_back(b.lower);
    times.push_back(b.upper);
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  const auto rank = [&](int64_t t) {
    return static_cast<uint32_t>(std::lower_bound(times.begin(), times.end(), t) - times.begin());
  };
  Segments s;
  s.count = times.empty() ? 0 : times.size() - 1;
  s.first.reserve(problem.buffers.size());
  s.last.reserve(problem.buffers.size());
  for (const LayoutBuffer& b : problem.buffers) {
    s.first.push_back(rank(b.lower));
    s.last.push_back(rank(b.upper));
  }
  return s;
}

// Calls visit(node) for the canonical nodes of leaves [first, last) in a
// complete binary tree with `leaves` leaves (node 1 the root, node k's
// children 2k and 2k + 1, leaf j at node leaves + j): the O(log n) maximal
// nodes that tile the range.
template <typename Visit>
void for_each_cover_node(size_t leaves, size_t first, size_t last, Visit&& visit) {
  for (first += leaves, last += leaves; first < last; first /= 2, last /= 2) {
    if (first & 1) visit(first++);
    if (last & 1) visit(--last);
  }
}

// x rounded up to a multiple of `alignment` (a power of two); x and the result
// stay within 2^63 for x <= 2^62, alignment <= 2^62.
inline uint64_t round_up(uint64_t x, uint64_t alignment) {
  return (x + alignment - 1) & ~(alignment - 1);
}

}  // namespace memwall::detail
