// The registry of layout heuristics (heuristics.h).
#include <algorithm>
#include <array>

#include "memwall/layout/heuristics.h"

namespace memwall {
namespace {

constexpr std::array<LayoutHeuristic, 6> kHeuristics{{
    {"greedy-by-size", greedy_by_size},
    {"greedy-by-breadth", greedy_by_breadth},
    {"greedy-by-conflicts", greedy_by_conflicts},
    {"best-fit-by-size", heap_best_fit_by_size},
    {"best-fit-by-duration", heap_best_fit_by_duration},
    {"best-fit", heap_best_fit},
}};

}  // namespace

std::span<const LayoutHeuristic> layout_heuristics() { return kHeuristics; }

const LayoutHeuristic* find_layout_heuristic(std::string_view name) {
  const auto it = std::find_if(kHeuristics.begin(), kHeuristics.end(),
                               [&](const LayoutHeuristic& h) { return h.name == name; });
  return it == kHeuristics.end() ? nullptr : &*it;
}

}  // namespace memwall
