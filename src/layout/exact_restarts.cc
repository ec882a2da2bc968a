// decide_leaf (exact.h): restarts of the leaf search.
//
// Note [Restarts]
// ~~~~~~~~~~~~~~~
// How long a depth-first search takes to find a tight layout depends wildly
// on its tie-breaking order: one order finishes in a thousand nodes where
// another wanders for millions in a subtree doomed by an early choice. So
// decide_leaf runs many short searches instead of one long one, with node
// limits following Luby's sequence (1 1 2 1 1 2 4 1 1 2 ...) times a unit
// proportional to the leaf size: short runs dominate, yet the limit grows
// without bound, so a search that needs many nodes eventually gets them.
// Runs cycle through the static preorders, then the same jittered with a
// fresh seed each time (deterministic: the same runs in the same order on
// every call). Any run that completes decides the leaf: a layout, or
// infeasibility (every run is a complete search, only cut short by its
// limit).
//
// The runs share one table of failed states: a state whose subtree failed
// has no completion at this capacity whatever the order, so what one run
// refuted the next one skips. Restarts then lose less of their work (E
// needed 1.76M nodes with a table per run, 1.25M with the shared one).
#include <algorithm>
#include <iterator>

#include "memwall/layout/exact.h"

namespace memwall::exact_detail {
namespace {

// The i-th term (from 1) of Luby's sequence.
int64_t luby(int64_t i) {
  while (true) {
    int64_t k = 1;
    while ((int64_t{1} << k) - 1 < i) ++k;
    if ((int64_t{1} << k) - 1 == i) return int64_t{1} << (k - 1);
    i -= (int64_t{1} << (k - 1)) - 1;
  }
}

constexpr int64_t kUnitPerBuffer = 4;

}  // namespace

Outcome decide_leaf(const LeafModel& model, uint64_t capacity, const SearchLimits& limits,
                    std::vector<uint64_t>& offsets, int64_t& nodes) {
  if (model.peak > capacity) return Outcome::kInfeasible;
  const int64_t start = nodes;
  const int64_t unit = std::max<int64_t>(kUnitPerBuffer * model.buffers(), 256);
  constexpr auto kOrders = static_cast<int64_t>(std::size(kPreorders));
  uint64_t seed = 0;
  FailedStates failed(16);
  for (int64_t run = 1;; ++run) {
    const int64_t slot = (run - 1) % (2 * kOrders);
    const auto order = static_cast<size_t>(slot % kOrders);
    const Ranking ranking{.order = kPreorders[order], .seed = slot < kOrders ? 0 : ++seed};
    SearchLimits limit = limits;
    limit.nodes = luby(run) * unit;
    if (limits.nodes > 0) {
      const int64_t left = limits.nodes - (nodes - start);
      if (left <= 0) return Outcome::kAborted;
      limit.nodes = std::min(limit.nodes, left);
    }
    const Outcome outcome =
        search_leaf(model, capacity, ranking, true, limit, offsets, nodes, &failed);
    if (outcome != Outcome::kAborted) return outcome;
    if (SolverClock::now() >= limits.deadline) return Outcome::kAborted;
  }
}

}  // namespace memwall::exact_detail
