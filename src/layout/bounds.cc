// Lower bounds on the arena of any valid layout (problem.h).
//
// Note [Aligned bound]
// ~~~~~~~~~~~~~~~~~~~~
// Let S be the buffers live at some time t, with sizes s_i, A the alignment,
// r_i = round_up(s_i, A) and slack_i = r_i - s_i. In any valid layout the
// buffers of S are pairwise disjoint in address; list them by offset,
// o_1 < o_2 < ... < o_k. Buffer j + 1 starts at or above the end of buffer j,
// and both offsets are multiples of A, so o_{j+1} >= o_j + r_j (the first
// multiple of A at or above o_j + s_j is o_j + r_j). Summing, the arena is at
// least o_k + s_k >= r_1 + ... + r_{k-1} + s_k = sum(r) - slack_k
// >= sum(r) - max_{i in S} slack_i. The bound is the largest value of
// sum(r) - max(slack) over t. It is never below the plain live bound:
// sum(r) - max(slack) = sum(s) + (sum(slack) - max(slack)) >= sum(s). With
// A = 1 every slack is 0 and the two coincide.
//
// Only the sets live right after some buffer starts need evaluating: removing
// a buffer i lowers sum(r) by r_i and max(slack) by at most slack_i < r_i, so
// the value only falls between starts. And a value computed after some but
// not all starts at one time is a value of a subset of the buffers live then,
// itself a valid (weaker) bound, so a sweep may evaluate after every start.
// The sweep keeps max(slack) in a max-heap with lazy deletion: O(n log n).
#include <queue>
#include <utility>
#include <vector>

#include "memwall/base/error.h"
#include "memwall/layout/problem.h"
#include "time_order.h"

namespace memwall {
namespace {

constexpr const char* kLiveBytes = "layout: bytes live at one time";

}  // namespace

uint64_t live_lower_bound(const LayoutProblem& problem) {
  const auto& buffers = problem.buffers;
  const detail::TimeOrder order = detail::time_order(problem);
  uint64_t live = 0, best = 0;
  size_t next_end = 0;
  for (const uint32_t i : order.by_lower) {
    for (; next_end < order.by_upper.size(); ++next_end) {
      const uint32_t e = order.by_upper[next_end];
      if (buffers[e].upper > buffers[i].lower) break;
      if (buffers[e].lower < buffers[e].upper) live -= buffers[e].size;
    }
    if (buffers[i].lower >= buffers[i].upper) continue;  // never live (invalid problem)
    live = checked_add(live, buffers[i].size, kLiveBytes);
    best = std::max(best, live);
  }
  return best;
}

uint64_t arena_lower_bound(const LayoutProblem& problem) {
  const auto& buffers = problem.buffers;
  const uint64_t alignment = problem.alignment == 0 ? 1 : problem.alignment;
  const auto rounded = [&](uint32_t i) { return detail::round_up(buffers[i].size, alignment); };
  const detail::TimeOrder order = detail::time_order(problem);
  // (slack, buffer) of buffers added so far; dead ones are popped lazily.
  std::priority_queue<std::pair<uint64_t, uint32_t>> slacks;
  uint64_t live = 0, best = 0;  // live: sum of rounded sizes
  size_t next_end = 0;
  for (const uint32_t i : order.by_lower) {
    const int64_t now = buffers[i].lower;
    for (; next_end < order.by_upper.size(); ++next_end) {
      const uint32_t e = order.by_upper[next_end];
      if (buffers[e].upper > now) break;
      if (buffers[e].lower < buffers[e].upper) live -= rounded(e);
    }
    if (buffers[i].lower >= buffers[i].upper) continue;
    live = checked_add(live, rounded(i), kLiveBytes);
    slacks.emplace(rounded(i) - buffers[i].size, i);
    while (buffers[slacks.top().second].upper <= now) slacks.pop();
    best = std::max(best, live - slacks.top().first);
  }
  return best;
}

}  // namespace memwall
