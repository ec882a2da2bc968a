// The op-level search of memwall's planner (docs/remat-memwall.md): which
// saved activations to drop, decided per producing op, and evaluated by the
// simulator on the checkpointing schedule (checkpoints.h). Internal to
// src/remat.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/plan/plan.h"
#include "planner_common.h"

namespace memwall::remat_detail {

// The droppable outputs of one forward op: dropped or kept together, since
// one recompute of the op regenerates all of them.
struct DropItem {
  OpId op = kNoOp;
  uint64_t bytes = 0;     // its droppable outputs
  double cost = 0;        // seconds to regenerate them from what stays resident
  bool boundary = false;  // creates an articulation point (candidate_checkpoints)
  std::vector<BufferId> outputs;
};

// A plan judged by the simulator with no budget limit.
struct Judged {
  Plan plan;
  bool valid = false;
  uint64_t peak = 0;
  double time = 0;
  std::string how;  // one line: which family, what was dropped

  bool fits(uint64_t budget) const { return valid && peak <= budget; }
  // Shorter iteration first, then lower peak.
  bool better_than(const Judged& other) const {
    return time < other.time || (time == other.time && peak < other.peak);
  }
  // Takes `other` when it fits the budget and this does not, or is better.
  void keep_better(Judged other, uint64_t budget) {
    if (other.fits(budget) && (!fits(budget) || other.better_than(*this))) {
      *this = std::move(other);
    }
  }
};

// Simulates `plan` with no budget limit (to learn its peak even when it is
// over) and records the verdict; the plan keeps its own budget.
Judged judge(const Graph& graph, const Hardware& hardware, Plan plan, std::string how);

class CheckpointSearch {
 public:
  CheckpointSearch(const Graph& graph, const Hardware& hardware, uint64_t budget);

  // The best plan this search finds within the budget before `deadline`
  // (seconds on `clock`); invalid (valid = false) when none fits. Also
  // records the lowest peak any evaluated keep set reached.
  Judged run(const Stopwatch& clock, double deadline);

  // The lowest peak of the full-drop plan of each segmentation (what this
  // search can reach at all), and on small graphs of every keep set, with
  // that plan.
  Judged lowest();

  size_t evaluations() const { return evaluations_; }
  std::span<const DropItem> items() const { return items_; }

 private:
  // Keep set with the items whose flag is set in `dropped` dropped.
  std::vector<uint8_t> keep_of(std::span<const uint8_t> dropped) const;
  Judged judge(std::span<const uint8_t> dropped, std::string how);
  // Few enough items to try every keep set (Note [Small graphs exactly]).
  bool small() const;
  // Every keep set: the fastest that fits the budget, or with
  // `lowest_peak` the lowest peak (then the fastest).
  Judged exhaustive(bool lowest_peak = false);
  // Boundary items kept under segmentation stride m (every m-th kept, the
  // last one of each segment), the rest eligible to drop.
  std::vector<uint8_t> segment_kept(size_t stride) const;
  // Strides tried: 1 .. ceil(sqrt(boundaries)) + 1 (Note [Segmentations]).
  size_t strides() const;
  std::string family(size_t stride) const;  // stride_family of this graph's boundaries
  // Smallest prefix of `order` whose dropping fits; nullopt-like invalid
  // result when even the whole order does not.
  Judged bisect(std::span<const size_t> order, const std::string& family);
  // Re-keeps dropped items, most expensive per byte first, in groups that
  // are split when they do not fit (Note [Re-keeping in groups]).
  Judged refine(Judged start, std::vector<uint8_t> dropped, const Stopwatch& clock,
                double deadline);
  // Exchanges a dropped item for a cheaper kept one while that helps
  // (Note [Swaps]).
  Judged swap(Judged start, std::vector<uint8_t> dropped, const Stopwatch& clock, double deadline);

  const Graph& graph_;
  const Hardware& hardware_;
  uint64_t budget_;
  std::vector<DropItem> items_;
  std::vector<size_t> by_ratio_;  // item indices, cheapest per byte first
  std::vector<size_t> boundary_;  // boundary item indices, in forward order
  size_t evaluations_ = 0;
  // The best fitting result of the bisections so far and its dropped set
  // (empty: none fits), for refinement.
  Judged best_found_;
  std::vector<uint8_t> best_dropped_;
};

// How a keep set of every `stride`-th of `boundaries` layer boundaries
// reads in messages: "op-level, 3 of 10 boundaries kept (one in 3)"; a
// stride past the count keeps none; without boundaries, just "op-level".
std::string stride_family(size_t stride, size_t boundaries);

}  // namespace memwall::remat_detail
