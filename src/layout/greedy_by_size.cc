// Greedy by size with best-gap placement, the offset-calculation strategy of
// Pisarchyk & Lee, "Efficient Memory Management for Deep Neural Net
// Inference" (2020), as TFLite's GPU delegate implements it
// (memory_management/greedy_by_size_assignment.cc): buffers by size
// descending; each goes into the smallest gap between the already placed
// buffers whose lifetimes intersect its own that holds it, else above the
// highest of them (Fit::kBestGap). TFLite's sort leaves ties unspecified;
// here they go by index.
#include <algorithm>
#include <numeric>

#include "memwall/layout/heuristics.h"
#include "memwall/layout/placement.h"
#include "memwall/layout/problem.h"

namespace memwall {

std::vector<BufferIndex> order_by_size(const LayoutProblem& problem) {
  const auto& buffers = problem.buffers;
  std::vector<BufferIndex> order(buffers.size());
  std::iota(order.begin(), order.end(), BufferIndex{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](BufferIndex a, BufferIndex b) { return buffers[a].size > buffers[b].size; });
  return order;
}

Layout greedy_by_size(const LayoutProblem& problem) {
  validate_problem(problem);
  return place_in_order(problem, order_by_size(problem), Fit::kBestGap);
}

}  // namespace memwall
