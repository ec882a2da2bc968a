// Placer and place_in_order (placement.h).
//
// Note [Occupancy tree]
// ~~~~~~~~~~~~~~~~~~~~~
// Every placement rule needs, for a buffer i, the union of the address ranges
// [offset, aligned end) of the placed buffers whose lifetimes meet i's: its
// gaps are the holes of that union below its top. Listing the conflicts one
// by one is too slow on training graphs (PanGu-α: 12M placed conflicts over
// 18,692 buffers, then a sort per buffer), so the union is kept pre-merged:
//
// Time is cut into elementary segments (time_order.h), the leaves of a
// complete binary tree. A placed buffer's range goes into
//   cover(v) for the O(log n) canonical nodes v tiling its segments, and
//   below(v) for those nodes and every node on the paths from its first and
//   last leaves to the root.
// Each node's sets are IntervalSets: merged, so short when the layout is good.
// A query for buffer i unions below(c) over i's canonical nodes c and
// cover(v) over the nodes v on the paths from i's first and last leaves to
// the root. Why this is exactly the placed conflicts of i:
//  - Only conflicts: below(c) holds buffers meeting c's segments, which are
//    i's; cover(v) holds buffers covering all of v, which contains one of
//    i's leaves.
//  - All of them: a placed j meeting i has a canonical node c' that meets
//    some canonical node c of i, and two tree nodes that meet are nested. If
//    c' lies within c, j is in below(c) (below(c') fed the path through c).
//    If c' strictly contains c, c' is not inside i's range, so it holds a
//    leaf of i and a leaf outside, hence i's first or last leaf: it is on one
//    of the two paths and j is in cover(c').
// A query or an insertion touches O(log n) sets.
#include "memwall/layout/placement.h"

#include <algorithm>
#include <bit>
#include <limits>

#include "interval_set.h"
#include "memwall/base/error.h"
#include "memwall/layout/problem.h"
#include "time_order.h"

namespace memwall {

struct Placer::State {
  explicit State(const LayoutProblem& p)
      : problem(p),
        time(detail::segments(p)),
        leaves(std::bit_ceil(std::max<size_t>(time.count, 1))),
        cover(2 * leaves),
        below(2 * leaves),
        offset(p.buffers.size(), 0),
        placed(p.buffers.size(), 0) {}

  // Calls visit(node) for each node on the paths from buffer i's first and
  // last leaves to the root, once each.
  template <typename Visit>
  void for_each_path_node(BufferIndex i, Visit&& visit) const {
    size_t a = leaves + time.first[i], b = leaves + time.last[i] - 1;
    for (; a != b; a /= 2, b /= 2) {  // leaves share a depth: the paths meet
      visit(a);
      visit(b);
    }
    for (; a >= 1; a /= 2) visit(a);
  }

  // The union of buffer i's placed conflicts' ranges: sorted, disjoint,
  // touching ones merged. The O(log n) sets are each sorted, so they are
  // merged pairwise (merging also drops the ranges several sets share).
  std::span<const detail::Range> conflicts_union(BufferIndex i) {
    runs.clear();
    const auto take = [&](const detail::IntervalSet& set) {
      if (!set.ranges().empty()) runs.emplace_back(set.ranges());
    };
    detail::for_each_cover_node(leaves, time.first[i], time.last[i],
                                [&](size_t node) { take(below[node]); });
    for_each_path_node(i, [&](size_t node) { take(cover[node]); });
    if (runs.empty()) return {};
    while (runs.size() > 1) {
      // One round halves the number of runs, writing each into its own slice
      // of `spare`, reserved first so that the slices never move.
      size_t total = 0;
      for (const auto& run : runs) total += run.size();
      spare.clear();
      spare.reserve(total);
      next_runs.clear();
      for (size_t k = 0; k < runs.size(); k += 2) {
        const size_t begin = spare.size();
        const std::span<const detail::Range> second =
            k + 1 < runs.size() ? runs[k + 1] : std::span<const detail::Range>();
        detail::append_union(runs[k], second, spare);
        next_runs.emplace_back(spare.data() + begin, spare.size() - begin);
      }
      std::swap(spare, merged);
      runs.swap(next_runs);
    }
    return runs[0];
  }

  // The highest end among buffer i's placed conflicts (0 when none).
  uint64_t top(BufferIndex i) const {
    uint64_t top = 0;
    detail::for_each_cover_node(leaves, time.first[i], time.last[i],
                                [&](size_t node) { top = std::max(top, below[node].top()); });
    for_each_path_node(i, [&](size_t node) { top = std::max(top, cover[node].top()); });
    return top;
  }

  const LayoutProblem& problem;
  detail::Segments time;
  size_t leaves;
  std::vector<detail::IntervalSet> cover, below;  // by tree node
  std::vector<uint64_t> offset;
  std::vector<uint8_t> placed;
  // Scratch for conflicts_union().
  std::vector<std::span<const detail::Range>> runs, next_runs;
  std::vector<detail::Range> merged, spare;
  uint64_t arena = 0;
};

Placer::Placer(const LayoutProblem& problem) {
  validate_problem(problem);  // the tree relies on lower < upper
  state_ = std::make_unique<State>(problem);
}
Placer::~Placer() = default;
Placer::Placer(Placer&&) noexcept = default;

bool Placer::placed(BufferIndex i) const { return state_->placed[i] != 0; }
uint64_t Placer::arena() const { return state_->arena; }
Layout Placer::layout() const { return Layout{.offsets = state_->offset, .arena = state_->arena}; }

uint64_t Placer::choose(BufferIndex i, Fit fit) {
  State& s = *state_;
  if (fit == Fit::kAboveConflicts) return s.top(i);
  const std::span<const detail::Range> ranges = s.conflicts_union(i);
  const uint64_t size = s.problem.buffers[i].size;
  uint64_t top = 0;  // the end of the previous range
  uint64_t best = 0, best_gap = std::numeric_limits<uint64_t>::max();
  bool found = false;
  const auto consider = [&](uint64_t start, uint64_t gap) {
    // Strictly smaller: the lowest of equal gaps wins, as in TFLite and XLA.
    if (gap >= size && gap < best_gap) {
      best = start;
      best_gap = gap;
      found = true;
    }
  };
  for (const detail::Range& r : ranges) {
    if (r.start > top) {
      if (fit == Fit::kFirstFit && r.start - top >= size) return top;
      consider(top, r.start - top);
    }
    top = r.end;
  }
  if (fit == Fit::kBestFit && s.arena > top) consider(top, s.arena - top);
  return found && fit != Fit::kFirstFit ? best : top;
}

void Placer::place(BufferIndex i, uint64_t offset) {
  State& s = *state_;
  const uint64_t end = checked_add(offset, s.problem.buffers[i].size, "layout: arena");
  const uint64_t aligned_end = detail::round_up(end, s.problem.alignment);
  s.offset[i] = offset;
  s.placed[i] = 1;
  s.arena = std::max(s.arena, end);
  detail::for_each_cover_node(s.leaves, s.time.first[i], s.time.last[i], [&](size_t node) {
    s.cover[node].insert(offset, aligned_end);
    s.below[node].insert(offset, aligned_end);
  });
  s.for_each_path_node(i, [&](size_t node) { s.below[node].insert(offset, aligned_end); });
}

Layout place_in_order(const LayoutProblem& problem, std::span<const BufferIndex> order, Fit fit) {
  const size_t n = problem.buffers.size();
  if (order.size() != n) fail("layout: an order of {} buffers for {} buffers", order.size(), n);
  Placer placer(problem);
  for (const BufferIndex i : order) {
    if (i >= n || placer.placed(i)) {
      fail("layout: the order repeats or misses buffers (index {} of {})", i, n);
    }
    placer.place(i, placer.choose(i, fit));
  }
  return placer.layout();
}

}  // namespace memwall
