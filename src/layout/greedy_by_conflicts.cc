// TVM's unified static memory planner (USMP), greedy_by_conflicts
// (apache/tvm src/tir/usmp/algo/greedy.cc): buffers by their number of
// liveness conflicts descending, ties by size descending; each is placed at
// the largest aligned end among its already placed conflicts
// (Fit::kAboveConflicts), never in a gap below them. TVM breaks the last ties
// by name; here by index.
#include <algorithm>
#include <numeric>

#include "memwall/layout/heuristics.h"
#include "memwall/layout/placement.h"
#include "memwall/layout/problem.h"

namespace memwall {

// Buffer i conflicts with every other buffer except those ending at or before
// its lower and those starting at or after its upper: two binary searches.
std::vector<BufferIndex> order_by_conflicts(const LayoutProblem& problem) {
  const auto& buffers = problem.buffers;
  const size_t n = buffers.size();
  std::vector<int64_t> lowers(n), uppers(n);
  for (size_t i = 0; i < n; ++i) {
    lowers[i] = buffers[i].lower;
    uppers[i] = buffers[i].upper;
  }
  std::sort(lowers.begin(), lowers.end());
  std::sort(uppers.begin(), uppers.end());
  std::vector<size_t> conflicts(n);
  for (size_t i = 0; i < n; ++i) {
    const auto ended = std::upper_bound(uppers.begin(), uppers.end(), buffers[i].lower);
    const auto not_started = std::lower_bound(lowers.begin(), lowers.end(), buffers[i].upper);
    const auto before = static_cast<size_t>(ended - uppers.begin());
    const auto after = static_cast<size_t>(lowers.end() - not_started);
    conflicts[i] = n - 1 - before - after;  // i itself is in neither group
  }
  std::vector<BufferIndex> order(n);
  std::iota(order.begin(), order.end(), BufferIndex{0});
  std::stable_sort(order.begin(), order.end(), [&](BufferIndex a, BufferIndex b) {
    if (conflicts[a] != conflicts[b]) return conflicts[a] > conflicts[b];
    return buffers[a].size > buffers[b].size;
  });
  return order;
}

Layout greedy_by_conflicts(const LayoutProblem& problem) {
  validate_problem(problem);
  return place_in_order(problem, order_by_conflicts(problem), Fit::kAboveConflicts);
}

}  // namespace memwall
