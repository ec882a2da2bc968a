// Splitting a layout problem into leaves the exact search solves on its own.
//
// Note [Decomposition]
// ~~~~~~~~~~~~~~~~~~~~
// Two facts make large problems small:
//
// 1. Independence. If no lifetime crosses a time point t, the buffers live
//    before t and those live after t never conflict, and each group can be
//    laid out from offset 0 on its own; the arena is the larger of the two.
//
// 2. Stacking. A buffer b live during the whole span of a group (its
//    lifetime covers every other's) conflicts with all of them. In any
//    layout, moving b to the bottom of the group and shifting up by b's size
//    every buffer that sat below it keeps the layout valid (b's address range
//    was free at all times, so the shifted buffers land where b was) and the
//    arena unchanged. So some optimal layout has b at the bottom. With an
//    alignment the shift must keep offsets aligned, so only buffers whose size
//    is a multiple of the alignment are stacked.
//
// Applying both repeatedly (stack the whole-span buffers of a group, split
// the rest at free time points, recurse) turns the nested lifetimes typical
// of training (parameters live throughout; forward activations live until
// their backward use) into stacks fixed without search, and leaves groups
// whose lifetimes overlap in a tangle: the leaves.
#include <algorithm>
#include <limits>
#include <utility>

#include "memwall/layout/exact.h"

namespace memwall::exact_detail {
namespace {

// Peak of the live bytes of `items`; lifetimes are half-open, so a buffer
// ending at t and one starting at t are never live together.
uint64_t peak_live(const LayoutProblem& problem, std::span<const int> items) {
  std::vector<std::pair<int64_t, uint64_t>> ends, starts;
  starts.reserve(items.size());
  ends.reserve(items.size());
  for (const int i : items) {
    const LayoutBuffer& b = problem.buffers[i];
    starts.emplace_back(b.lower, b.size);
    ends.emplace_back(b.upper, b.size);
  }
  std::sort(starts.begin(), starts.end());
  std::sort(ends.begin(), ends.end());
  uint64_t live = 0, peak = 0;
  size_t e = 0;
  for (const auto& [time, size] : starts) {
    while (e < ends.size() && ends[e].first <= time) live -= ends[e++].second;
    live += size;
    peak = std::max(peak, live);
  }
  return peak;
}

}  // namespace

Decomposition decompose(const LayoutProblem& problem) {
  Decomposition d;
  const uint64_t align = std::max<uint64_t>(problem.alignment, 1);
  uint64_t total = 0;
  std::vector<int> order;
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    const LayoutBuffer& b = problem.buffers[i];
    if (b.size > std::numeric_limits<uint64_t>::max() - total) d.overflow = true;
    total += b.size;
    if (b.size == 0 || b.lower >= b.upper) {
      // Conflicts with nothing: offset 0 is as good as any.
      d.fixed.push_back(static_cast<int>(i));
      d.fixed_offsets.push_back(0);
      d.fixed_arena = std::max(d.fixed_arena, b.size);
    } else {
      order.push_back(static_cast<int>(i));
    }
  }
  // Room for alignment padding between every pair: offsets never wrap.
  if (d.overflow || total > std::numeric_limits<uint64_t>::max() / 2 -
                                static_cast<uint64_t>(problem.buffers.size()) * align) {
    d.overflow = true;
    return d;
  }
  const auto& buffers = problem.buffers;
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return buffers[a].lower < buffers[b].lower; });

  // Groups still to examine: buffers sorted by lower, and the group's base.
  std::vector<std::pair<std::vector<int>, uint64_t>> work;
  if (!order.empty()) work.emplace_back(std::move(order), 0);
  while (!work.empty()) {
    auto [items, base] = std::move(work.back());
    work.pop_back();
    size_t i = 0;
    while (i < items.size()) {
      // One group: buffers chained by overlapping lifetimes.
      int64_t end = buffers[items[i]].upper;
      size_t j = i + 1;
      while (j < items.size() && buffers[items[j]].lower < end) {
        end = std::max(end, buffers[items[j]].upper);
        ++j;
      }
      const int64_t begin = buffers[items[i]].lower;
      std::vector<int> rest;
      uint64_t top = base;
      for (size_t k = i; k < j; ++k) {
        const LayoutBuffer& b = buffers[items[k]];
        if (b.lower == begin && b.upper == end && b.size % align == 0) {
          d.fixed.push_back(items[k]);
          d.fixed_offsets.push_back(top);
          top += b.size;
        } else {
          rest.push_back(items[k]);
        }
      }
      d.fixed_arena = std::max(d.fixed_arena, top);
      if (top == base) {
        Leaf leaf;
        leaf.buffers = std::move(rest);
        leaf.base = base;
        leaf.lower_bound = base + peak_live(problem, leaf.buffers);
        d.lower_bound = std::max(d.lower_bound, leaf.lower_bound);
        d.leaves.push_back(std::move(leaf));
      } else if (!rest.empty()) {
        work.emplace_back(std::move(rest), top);
      }
      i = j;
    }
  }
  d.lower_bound = std::max(d.lower_bound, d.fixed_arena);
  return d;
}

}  // namespace memwall::exact_detail
