// Internal: a set of disjoint half-open address ranges [start, end), kept
// sorted and merged (touching ranges become one). Placement (placement.cc)
// keeps one per segment-tree node; merging is what keeps them short, since a
// good layout packs the buffers of nearby times into few solid blocks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace memwall::detail {

struct Range {
  uint64_t start;
  uint64_t end;
};

class IntervalSet {
 public:
  void insert(uint64_t start, uint64_t end) {
    // [first, last): the ranges that overlap or touch [start, end).
    const auto first = std::partition_point(ranges_.begin(), ranges_.end(),
                                            [&](const Range& r) { return r.end < start; });
    const auto last =
        std::partition_point(first, ranges_.end(), [&](const Range& r) { return r.start <= end; });
    if (first == last) {
      ranges_.insert(first, Range{start, end});
      return;
    }
    first->start = std::min(first->start, start);
    first->end = std::max(std::prev(last)->end, end);
    ranges_.erase(first + 1, last);
  }

  const std::vector<Range>& ranges() const { return ranges_; }
  // The highest end (0 when empty).
  uint64_t top() const { return ranges_.empty() ? 0 : ranges_.back().end; }

 private:
  std::vector<Range> ranges_;
};

// Appends the union of two sorted, disjoint range lists to `out` as one
// sorted, disjoint list (ranges that overlap or touch are merged; what `out`
// held before is left alone).
inline void append_union(std::span<const Range> a, std::span<const Range> b,
                         std::vector<Range>& out) {
  const size_t first = out.size();
  const auto push = [&](const Range& r) {
    if (out.size() > first && r.start <= out.back().end) {
      out.back().end = std::max(out.back().end, r.end);
    } else {
      out.push_back(r);
    }
  };
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) push(a[i].start <= b[j].start ? a[i++] : b[j++]);
  for (; i < a.size(); ++i) push(a[i]);
  for (; j < b.size(); ++j) push(b[j]);
}

}  // namespace memwall::detail
