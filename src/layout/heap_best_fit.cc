// XLA's heap simulator, GlobalDecreasingSizeBestFitHeap
// (tensorflow/compiler/xla/service/heap_simulator.cc): every buffer, in a
// global order, takes the smallest free chunk that holds it among the gaps
// between the placed buffers it overlaps in time, including the room between
// the highest of them and the current heap size; when none holds it, it goes
// above them and the heap grows (Fit::kBestFit). XLA runs two orders, the
// spatial one (size, then duration, descending) and the temporal one
// (duration, then size), and keeps the smaller heap (ChooseBestHeapAlgorithm,
// the first listed on a tie). XLA breaks the last ties by buffer id; here by
// index.
#include <algorithm>
#include <numeric>

#include "memwall/layout/heuristics.h"
#include "memwall/layout/placement.h"
#include "memwall/layout/problem.h"

namespace memwall {
namespace {

uint64_t duration(const LayoutBuffer& b) {
  return static_cast<uint64_t>(b.upper) - static_cast<uint64_t>(b.lower);  // no signed overflow
}

}  // namespace

std::vector<BufferIndex> order_by_size_then_duration(const LayoutProblem& problem) {
  const auto& buffers = problem.buffers;
  std::vector<BufferIndex> order(buffers.size());
  std::iota(order.begin(), order.end(), BufferIndex{0});
  std::stable_sort(order.begin(), order.end(), [&](BufferIndex a, BufferIndex b) {
    if (buffers[a].size != buffers[b].size) return buffers[a].size > buffers[b].size;
    return duration(buffers[a]) > duration(buffers[b]);
  });
  return order;
}

std::vector<BufferIndex> order_by_duration(const LayoutProblem& problem) {
  const auto& buffers = problem.buffers;
  std::vector<BufferIndex> order(buffers.size());
  std::iota(order.begin(), order.end(), BufferIndex{0});
  std::stable_sort(order.begin(), order.end(), [&](BufferIndex a, BufferIndex b) {
    if (duration(buffers[a]) != duration(buffers[b])) {
      return duration(buffers[a]) > duration(buffers[b]);
    }
    return buffers[a].size > buffers[b].size;
  });
  return order;
}

Layout heap_best_fit_by_size(const LayoutProblem& problem) {
  validate_problem(problem);
  return place_in_order(problem, order_by_size_then_duration(problem), Fit::kBestFit);
}

Layout heap_best_fit_by_duration(const LayoutProblem& problem) {
  validate_problem(problem);
  return place_in_order(problem, order_by_duration(problem), Fit::kBestFit);
}

Layout heap_best_fit(const LayoutProblem& problem) {
  Layout spatial = heap_best_fit_by_size(problem);
  Layout temporal = place_in_order(problem, order_by_duration(problem), Fit::kBestFit);
  return temporal.arena < spatial.arena ? temporal : spatial;
}

}  // namespace memwall
