// The greedy layout heuristics of the literature, each faithful to its source
// (docs/layout.md): an order and a placement rule from placement.h. Each
// validates the problem (Error on an invalid one), ignores the capacity (the
// arena may exceed it: check_layout tells), rounds every offset up to the
// alignment, and runs in O(n log n + total placed conflicts x log n).
#pragma once

#include <span>
#include <string_view>

#include "memwall/layout/types.h"

namespace memwall {

// TFLite's greedy by size with best-gap placement (Pisarchyk & Lee 2020;
// tensorflow/lite/delegates/gpu/common/memory_management/greedy_by_size_assignment.cc).
Layout greedy_by_size(const LayoutProblem& problem);
// Greedy by breadth for offsets (Pisarchyk & Lee 2020): time points by
// breadth, their buffers by size, best-gap placement.
Layout greedy_by_breadth(const LayoutProblem& problem);
// TVM's unified static memory planner, greedy_by_conflicts
// (apache/tvm src/tir/usmp/algo/greedy.cc): most-conflicted first, each above
// its placed conflicts.
Layout greedy_by_conflicts(const LayoutProblem& problem);
// XLA's GlobalDecreasingSizeBestFitHeap (heap_simulator.cc): best fit in the
// spatial order (size, then duration), in the temporal order (duration, then
// size), and the better of the two (the spatial one on a tie).
Layout heap_best_fit_by_size(const LayoutProblem& problem);
Layout heap_best_fit_by_duration(const LayoutProblem& problem);
Layout heap_best_fit(const LayoutProblem& problem);

struct LayoutHeuristic {
  std::string_view name;  // e.g. "greedy-by-size"
  Layout (*run)(const LayoutProblem&);
};
// Every heuristic above, in the order above.
std::span<const LayoutHeuristic> layout_heuristics();
// nullptr for an unknown name.
const LayoutHeuristic* find_layout_heuristic(std::string_view name);

}  // namespace memwall
