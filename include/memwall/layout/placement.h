// Building blocks of the greedy layout heuristics (heuristics.h): an order in
// which to place the buffers, and a rule choosing each buffer's offset among
// the buffers already placed whose lifetimes intersect its own (its placed
// "conflicts"). Every heuristic is one order plus one rule; other planners
// (the default combiner, searches) can mix them or drive a Placer directly.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "memwall/layout/types.h"

namespace memwall {

// Index of a buffer in LayoutProblem::buffers (validate_problem caps n below 2^32).
using BufferIndex = uint32_t;

// How a buffer's offset is chosen. "Gaps" are the free address ranges between
// the placed conflicts, each starting at a conflict's end rounded up to the
// alignment; the "top" is the highest such rounded end (0 when none).
enum class Fit : uint8_t {
  // TFLite greedy by size (Pisarchyk & Lee 2020): the smallest gap that
  // holds the buffer (the lowest of equal ones), else the top.
  kBestGap,
  // XLA's GlobalDecreasingSizeBestFitHeap: as kBestGap, but the room between
  // the top and the current arena end also counts as a gap.
  kBestFit,
  // The lowest gap that holds the buffer, else the top.
  kFirstFit,
  // TVM USMP greedy: the top, always (above every placed conflict).
  kAboveConflicts,
};

// Incremental placement. Gaps come from the union of the placed conflicts'
// address ranges, which Placer keeps per node of a segment tree over time
// (Note [Occupancy tree] in placement.cc): a query merges O(log n) short
// range lists instead of visiting every placed conflict. The constructor
// validates the problem (Error), which must outlive the Placer.
class Placer {
 public:
  explicit Placer(const LayoutProblem& problem);
  ~Placer();
  Placer(Placer&&) noexcept;
  Placer& operator=(Placer&&) = delete;

  // The offset `fit` gives buffer i now (i not yet placed).
  uint64_t choose(BufferIndex i, Fit fit);
  // Places buffer i at `offset` (i not yet placed; no overlap check). Throws
  // Error when offset + size exceeds 2^62.
  void place(BufferIndex i, uint64_t offset);
  bool placed(BufferIndex i) const;
  // Largest offset + size placed so far.
  uint64_t arena() const;
  // Offsets so far (0 for unplaced buffers) and the arena.
  Layout layout() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Places the buffers one at a time in `order` (a permutation of 0..n-1, else
// Error) with `fit`. Throws Error for an invalid problem.
Layout place_in_order(const LayoutProblem& problem, std::span<const BufferIndex> order, Fit fit);

// Orders. Every tie not named is broken by index, so all are deterministic.
// Size descending (TFLite greedy by size).
std::vector<BufferIndex> order_by_size(const LayoutProblem& problem);
// Time points by breadth (total size live there) descending, ties earliest
// first; at each, its buffers not yet ordered by size descending (Pisarchyk
// & Lee 2020, greedy by breadth).
std::vector<BufferIndex> order_by_breadth(const LayoutProblem& problem);
// Number of buffers whose lifetimes intersect it descending, then size
// descending (TVM USMP greedy_by_conflicts).
std::vector<BufferIndex> order_by_conflicts(const LayoutProblem& problem);
// Size descending, then duration (upper - lower) descending (XLA's spatial order).
std::vector<BufferIndex> order_by_size_then_duration(const LayoutProblem& problem);
// Duration descending, then size descending (XLA's temporal order).
std::vector<BufferIndex> order_by_duration(const LayoutProblem& problem);

}  // namespace memwall
