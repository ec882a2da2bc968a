// The exact layout solver: branch and bound over canonical solutions, in the
// spirit of MiniMalloc (Moffitt, ASPLOS 2023). See Note [Canonical search] in
// src/layout/exact_search.cc and Note [Minimizing the arena] in
// src/layout/exact.cc.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "memwall/layout/solver_clock.h"
#include "memwall/layout/types.h"

namespace memwall {

struct ExactOptions {
  // Capacity to decide. 0: the problem's capacity; when both are 0 the
  // solver minimizes the arena instead.
  uint64_t capacity = 0;
  // CPU seconds of the calling thread for the whole call (Note [CPU-time
  // budgets] in solver_clock.h).
  double time_limit = 1.0;
  // A valid layout to start from (a heuristic's): an upper bound on the
  // arena when minimizing, an answer when it already fits when deciding.
  std::optional<Layout> start;
  // Search nodes allowed in all (0: no limit). With a generous time limit a
  // node limit makes a run reproducible from one machine to another.
  int64_t node_limit = 0;
};

struct ExactResult {
  // The best layout found; when deciding, only a layout within the capacity.
  std::optional<Layout> layout;
  // Minimizing: the layout's arena equals best_lower_bound.
  bool proven_optimal = false;
  // Deciding: no layout fits the capacity.
  bool proven_infeasible = false;
  // No layout of the problem has a smaller arena (the live lower bound,
  // raised by every capacity the search proved infeasible).
  uint64_t best_lower_bound = 0;
  int64_t nodes = 0;  // placements tried
  double seconds = 0;
};

// Decides the capacity (or minimizes the arena, see ExactOptions::capacity)
// within the time limit. Offsets honour the problem's alignment. Every
// layout returned is valid; a proof (optimal, infeasible) is never claimed
// unless the search completed. Throws Error on an invalid problem
// (validate_problem) or one whose live bytes exceed 2^62 (as the bounds do).
ExactResult solve_exact(const LayoutProblem& problem, const ExactOptions& options = {});

// The building blocks of solve_exact, exposed for tests and benchmarks.
namespace exact_detail {

// A part of the problem that the search solves on its own: after buffers
// live during a whole stretch of time are stacked at the bottom (see Note
// [Decomposition] in exact_decompose.cc) and the rest is split where no
// lifetime crosses a time point. Its buffers sit at offsets >= base.
struct Leaf {
  std::vector<int> buffers;  // indices into problem.buffers, by lower
  uint64_t base = 0;         // a multiple of the alignment
  uint64_t lower_bound = 0;  // base + peak live bytes of the leaf
};

struct Decomposition {
  // Buffers whose offsets need no search: stacked ones, and those that
  // conflict with nothing (size 0 or an empty lifetime) at offset 0.
  std::vector<int> fixed;
  std::vector<uint64_t> fixed_offsets;
  uint64_t fixed_arena = 0;  // largest fixed offset + size
  std::vector<Leaf> leaves;
  uint64_t lower_bound = 0;  // peak live bytes of the whole problem
  bool overflow = false;     // sizes sum beyond 64 bits: no layout exists
};

Decomposition decompose(const LayoutProblem& problem);

// A leaf prepared for search. Time is cut into sections, the maximal sets
// of buffers live together (the maximal cliques of the interval graph); each
// buffer spans a contiguous range of them, and two buffers conflict exactly
// when their ranges intersect.
struct LeafModel {
  uint64_t alignment = 1;
  std::vector<int> global;  // leaf buffer -> problem buffer
  std::vector<uint64_t> size;
  std::vector<int64_t> lower, upper;
  std::vector<int> first_section, end_section;  // [first, end) per buffer
  int sections = 0;
  std::vector<uint64_t> section_bytes;  // live bytes per section
  // Section -> buffers live in it / starting in it (CSR), by first section.
  std::vector<int> members_begin, members;
  std::vector<int> starts_begin, starts;
  std::vector<int> crossing;  // boundary k (sections k, k+1) -> buffers spanning it
  uint64_t peak = 0;          // largest section_bytes

  int buffers() const { return static_cast<int>(size.size()); }
  // Calls visit(u) for every buffer u != b conflicting with b, by first
  // section: those live in b's first section, then those starting later in
  // its range. No conflict list is stored (it grows with the square of the
  // buffers live together).
  template <typename Visit>
  void for_each_conflict(int b, Visit&& visit) const {
    for (const int u : members_of(first_section[b])) {
      if (u != b) visit(u);
    }
    for (int s = first_section[b] + 1; s < end_section[b]; ++s) {
      for (const int u : starting_at(s)) visit(u);
    }
  }
  std::span<const int> members_of(int s) const {
    return {members.data() + members_begin[s], members.data() + members_begin[s + 1]};
  }
  std::span<const int> starting_at(int s) const {
    return {starts.data() + starts_begin[s], starts.data() + starts_begin[s + 1]};
  }
};

LeafModel build_model(const LayoutProblem& problem, const Leaf& leaf);

// Static orders the search breaks ties with (rank 0 first), see Note
// [Preorders] in exact_order.cc.
enum class Preorder { kLengthAreaTotal, kTotalAreaLength, kTotalLengthArea };
inline constexpr Preorder kPreorders[] = {Preorder::kLengthAreaTotal, Preorder::kTotalAreaLength,
                                          Preorder::kTotalLengthArea};
// seed != 0 jitters the order (ranks move by a few percent of n, the same
// for the same seed) so that restarts explore different trees.
std::vector<int> preorder_ranks(const LeafModel& model, Preorder order, uint64_t seed = 0);
// The same order over `buffers` only (ranks[i] for buffers[i], from 0),
// judging each buffer's crowding by `section_totals` (bytes per section) in
// place of the model's live bytes: the search re-ranks the buffers of each
// side of a split by the bytes still unplaced (Note [Re-ranking sides] in
// exact_search.cc).
std::vector<int> preorder_ranks(const LeafModel& model, Preorder order, uint64_t seed,
                                std::span<const uint64_t> section_totals,
                                std::span<const int> buffers);

// A static order for one search: the preorder and its jitter seed.
struct Ranking {
  Preorder order = Preorder::kLengthAreaTotal;
  uint64_t seed = 0;
};

enum class Outcome { kFound, kInfeasible, kAborted };

struct SearchLimits {
  int64_t nodes = 0;                                                  // 0: none
  SolverClock::time_point deadline = SolverClock::time_point::max();  // Note [CPU-time budgets]
};

// Hashes of search states proved to have no completion (Note [Canonical
// search] in exact_search.cc): a lossy table, a slot keeps the last state
// stored in it; it doubles as it fills, up to 2^20 slots. A state's failure
// holds whatever the order that found it, so the restarts of one decision
// share a table (Note [Restarts]); it is valid for one leaf at one capacity.
class FailedStates {
 public:
  explicit FailedStates(int bits = 10);
  // 0 marks an empty slot, so state 0 is never stored (a missed hit only).
  bool failed(uint64_t state) const { return state != 0 && slots_[state & mask_] == state; }
  void add(uint64_t state);

 private:
  size_t mask_;
  size_t stored_ = 0;  // adds since the last growth
  std::vector<uint64_t> slots_;
};

// One depth-first search of the leaf at `capacity` (relative to the leaf's
// base). On kFound, offsets[b] (relative to the base) is set for every leaf
// buffer. `nodes` accumulates the placements tried.
// Candidates at the same offset go by the rank `ranking` gives them, or,
// with by_load, first by the most unplaced bytes in a section they span
// (Note [Canonical search]).
// `failed` (null: a table of the search's own) records the states whose
// subtrees failed and prunes those met again.
Outcome search_leaf(const LeafModel& model, uint64_t capacity, const Ranking& ranking, bool by_load,
                    const SearchLimits& limits, std::vector<uint64_t>& offsets, int64_t& nodes,
                    FailedStates* failed = nullptr);

// search_leaf with restarts (Note [Restarts] in exact_restarts.cc) until one
// search completes or the limits run out.
Outcome decide_leaf(const LeafModel& model, uint64_t capacity, const SearchLimits& limits,
                    std::vector<uint64_t>& offsets, int64_t& nodes);

}  // namespace exact_detail
}  // namespace memwall
