// Greedy by breadth for offset calculation (Pisarchyk & Lee, "Efficient
// Memory Management for Deep Neural Net Inference", 2020; TFLite implements
// the shared-object form in greedy_by_breadth_assignment.cc): the breadth of
// an operator is the total size of the tensors live while it runs; operators
// go by breadth descending, and at each one its tensors not yet placed go by
// size descending, each into the best gap (Fit::kBestGap, as greedy by size).
//
// Lifetimes here are integer intervals rather than operator indices, so the
// "operators" are the elementary segments between consecutive distinct
// endpoints: inside one the live set, hence the breadth, is constant, and
// operators with equal live sets would contribute their buffers at the first
// of them anyway. Ties in breadth go earliest first (TFLite leaves them
// unspecified). Buffers live at a segment are found with a segment tree that
// lists every buffer at the O(log n) nodes covering its lifetime: a segment's
// buffers are the lists on its leaf-to-root path, and a node visited once
// has nothing left to give, so the whole order costs O(n log n).
#include <algorithm>
#include <bit>
#include <numeric>

#include "memwall/base/error.h"
#include "memwall/layout/heuristics.h"
#include "memwall/layout/placement.h"
#include "memwall/layout/problem.h"
#include "time_order.h"

namespace memwall {

std::vector<BufferIndex> order_by_breadth(const LayoutProblem& problem) {
  const auto& buffers = problem.buffers;
  const size_t n = buffers.size();
  if (n == 0) return {};
  const detail::Segments time = detail::segments(problem);
  const size_t segments = time.count;

  // Breadth of each segment from a difference array; additions first so the
  // running sum never goes below zero.
  std::vector<uint64_t> starting(segments + 1, 0), ending(segments + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    starting[time.first[i]] =
        checked_add(starting[time.first[i]], buffers[i].size, "layout: bytes live at one time");
    // Exact: the buffers ending at a segment are all live at the one before,
    // whose checked running sum below throws before any of this could wrap.
    ending[time.last[i]] += buffers[i].size;
  }
  std::vector<uint64_t> breadth(segments);
  uint64_t live = 0;
  for (size_t s = 0; s < segments; ++s) {
    live = checked_add(live, starting[s], "layout: bytes live at one time") - ending[s];
    breadth[s] = live;
  }

  // The segment tree's lists, stored contiguously: node k's buffers are
  // members[head[k] .. head[k + 1]).
  const size_t leaves = std::bit_ceil(segments);
  std::vector<size_t> head(2 * leaves + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    detail::for_each_cover_node(leaves, time.first[i], time.last[i],
                                [&](size_t node) { ++head[node + 1]; });
  }
  std::partial_sum(head.begin(), head.end(), head.begin());
  std::vector<BufferIndex> members(head.back());
  std::vector<size_t> fill(head.begin(), head.end() - 1);
  for (size_t i = 0; i < n; ++i) {
    detail::for_each_cover_node(leaves, time.first[i], time.last[i], [&](size_t node) {
      members[fill[node]++] = static_cast<BufferIndex>(i);
    });
  }

  std::vector<size_t> by_breadth(segments);
  std::iota(by_breadth.begin(), by_breadth.end(), size_t{0});
  std::stable_sort(by_breadth.begin(), by_breadth.end(),
                   [&](size_t a, size_t b) { return breadth[a] > breadth[b]; });

  std::vector<uint8_t> visited(2 * leaves, 0), taken(n, 0);
  std::vector<BufferIndex> order, here;
  order.reserve(n);
  for (const size_t s : by_breadth) {
    here.clear();
    for (size_t node = leaves + s; node >= 1 && !visited[node]; node /= 2) {
      visited[node] = 1;
      for (size_t k = head[node]; k < head[node + 1]; ++k) {
        if (!taken[members[k]]) {
          taken[members[k]] = 1;
          here.push_back(members[k]);
        }
      }
    }
    std::sort(here.begin(), here.end(), [&](BufferIndex a, BufferIndex b) {
      return buffers[a].size != buffers[b].size ? buffers[a].size > buffers[b].size : a < b;
    });
    order.insert(order.end(), here.begin(), here.end());
  }
  return order;
}

Layout greedy_by_breadth(const LayoutProblem& problem) {
  validate_problem(problem);
  return place_in_order(problem, order_by_breadth(problem), Fit::kBestGap);
}

}  // namespace memwall
