// solve_exact (exact.h): decomposition, per-leaf search, and the descent
// from the best known arena to the lower bound.
//
// Note [Minimizing the arena]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The problem splits into stacked buffers and leaves (Note [Decomposition]);
// some optimal layout keeps that shape, so the arena is the largest of the
// stacks' tops and of each leaf's base plus its own arena, and every leaf is
// minimized on its own terms: deciding capacity C for the problem decides
// C - base for each leaf, and one leaf that cannot fit proves C infeasible
// for the whole problem.
//
// Minimizing keeps a proven lower bound `lo` (the peak of live bytes, then
// every capacity proved infeasible plus one) and the best arena found `hi`
// (the start layout's, or the first dive's: a search at unbounded capacity
// always succeeds without backtracking). It then decides capacities in
// [lo, hi): first lo itself, since real problems often meet their peak, then
// the midpoint of what is left. (Deciding a given capacity above the bound
// also tries the bound first, briefly: tighter capacities prune more and
// sometimes finish at once.) A decision that finds a layout lowers `hi`
// to that layout's arena; one that completes without finding proves a new
// `lo`; one that runs out of time raises only the floor of the next
// midpoint. Each decision gets half of the remaining time, so the search
// narrows the gap step by step and stops at the limit with the best layout
// and the gap it proved.
#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>
#include <vector>

#include "memwall/layout/exact.h"
#include "memwall/layout/problem.h"

namespace memwall {
namespace {

using namespace exact_detail;
using Clock = SolverClock;  // Note [CPU-time budgets]

constexpr uint64_t kUnbounded = std::numeric_limits<uint64_t>::max();
constexpr int64_t kBoundAttemptNodesPerBuffer = 64;

uint64_t leaf_arena(const LeafModel& model, const std::vector<uint64_t>& offsets) {
  uint64_t top = 0;
  for (int b = 0; b < model.buffers(); ++b) top = std::max(top, offsets[b] + model.size[b]);
  return top;
}

class Solver {
 public:
  Solver(const LayoutProblem& problem, const ExactOptions& options, ExactResult& result)
      : problem_(problem), options_(options), result_(result), start_(Clock::now()) {
    deadline_ = start_ + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(std::max(options.time_limit, 0.0)));
  }

  void run() {
    validate_problem(problem_);
    d_ = decompose(problem_);
    result_.best_lower_bound = d_.lower_bound;
    if (d_.overflow) return;
    // The aligned bound can exceed the live peak; it holds for the whole
    // problem, so it only raises the floor of the descent.
    d_.lower_bound = std::max(d_.lower_bound, arena_lower_bound(problem_));
    result_.best_lower_bound = d_.lower_bound;
    models_.resize(d_.leaves.size());
    best_.resize(d_.leaves.size());
    top_.assign(d_.leaves.size(), kUnbounded);
    const uint64_t capacity = options_.capacity ? options_.capacity : problem_.capacity;
    if (capacity > 0) {
      decide(capacity);
    } else {
      minimize();
    }
  }

 private:
  const LeafModel& model(size_t leaf) {
    if (!models_[leaf]) models_[leaf] = build_model(problem_, d_.leaves[leaf]);
    return *models_[leaf];
  }

  // `nodes`: a cap of this call's own (0: none), within the option's.
  SearchLimits limits(Clock::time_point deadline, int64_t nodes = 0) const {
    SearchLimits l{.nodes = nodes, .deadline = std::min(deadline, deadline_)};
    if (options_.node_limit > 0) {
      const int64_t left = std::max<int64_t>(options_.node_limit - result_.nodes, 1);
      l.nodes = nodes > 0 ? std::min(nodes, left) : left;
    }
    return l;
  }

  bool out_of_budget() const {
    return Clock::now() >= deadline_ ||
           (options_.node_limit > 0 && result_.nodes >= options_.node_limit);
  }

  Layout assemble() const {
    Layout layout;
    layout.offsets.assign(problem_.buffers.size(), 0);
    for (size_t i = 0; i < d_.fixed.size(); ++i) layout.offsets[d_.fixed[i]] = d_.fixed_offsets[i];
    for (size_t l = 0; l < d_.leaves.size(); ++l) {
      const Leaf& leaf = d_.leaves[l];
      for (size_t b = 0; b < leaf.buffers.size(); ++b) {
        layout.offsets[leaf.buffers[b]] = leaf.base + best_[l][b];
      }
    }
    for (size_t i = 0; i < problem_.buffers.size(); ++i) {
      layout.arena = std::max(layout.arena, layout.offsets[i] + problem_.buffers[i].size);
    }
    return layout;
  }

  // Fits every leaf whose best layout is above `capacity`. Leaves closest
  // to the capacity go first: they are the likeliest to fail.
  Outcome probe(uint64_t capacity, Clock::time_point deadline, int64_t nodes = 0) {
    if (d_.lower_bound > capacity) return Outcome::kInfeasible;
    std::vector<size_t> order;
    for (size_t l = 0; l < d_.leaves.size(); ++l) {
      if (top_[l] == kUnbounded || d_.leaves[l].base + top_[l] > capacity) order.push_back(l);
    }
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return d_.leaves[a].lower_bound > d_.leaves[b].lower_bound;
    });
    for (const size_t l : order) {
      std::vector<uint64_t> offsets;
      const Outcome outcome = decide_leaf(model(l), capacity - d_.leaves[l].base,
                                          limits(deadline, nodes), offsets, result_.nodes);
      if (outcome != Outcome::kFound) return outcome;
      best_[l] = std::move(offsets);
      top_[l] = leaf_arena(model(l), best_[l]);
    }
    return Outcome::kFound;
  }

  void decide(uint64_t capacity) {
    if (options_.start && options_.start->arena <= capacity) {
      result_.layout = options_.start;
      return;
    }
    // A tighter capacity prunes more, and a search at the lower bound
    // sometimes succeeds at once where one at a looser capacity wanders:
    // a short attempt there comes first.
    if (d_.lower_bound < capacity &&
        probe(d_.lower_bound, deadline_, kBoundAttemptNodesPerBuffer * leaf_buffers()) ==
            Outcome::kFound) {
      result_.layout = assemble();
      return;
    }
    const Outcome outcome = probe(capacity, deadline_);
    if (outcome == Outcome::kFound) result_.layout = assemble();
    result_.proven_infeasible = outcome == Outcome::kInfeasible;
    if (result_.proven_infeasible)
      result_.best_lower_bound = std::max(d_.lower_bound, capacity + 1);
  }

  int64_t leaf_buffers() const {
    int64_t n = 0;
    for (const Leaf& leaf : d_.leaves) n += static_cast<int64_t>(leaf.buffers.size());
    return n;
  }

  // One dive per preorder at unbounded capacity; keeps each leaf's best.
  void dive() {
    for (size_t l = 0; l < d_.leaves.size(); ++l) {
      for (const Preorder order : kPreorders) {
        const LeafModel& m = model(l);
        std::vector<uint64_t> offsets;
        if (search_leaf(m, kUnbounded, {.order = order}, true, limits(deadline_), offsets,
                        result_.nodes) != Outcome::kFound) {
          break;
        }
        const uint64_t top = leaf_arena(m, offsets);
        if (top < top_[l]) {
          top_[l] = top;
          best_[l] = std::move(offsets);
        }
        if (d_.leaves[l].base + top_[l] <= d_.lower_bound || out_of_budget()) break;
      }
    }
  }

  void minimize() {
    uint64_t lo = d_.lower_bound;
    uint64_t hi = kUnbounded;
    if (options_.start) {
      result_.layout = options_.start;
      hi = options_.start->arena;
    }
    if (hi > lo) {
      dive();
      const bool complete =
          std::all_of(top_.begin(), top_.end(), [](uint64_t t) { return t != kUnbounded; });
      if (complete) {
        Layout own = assemble();
        if (own.arena < hi) {
          hi = own.arena;
          result_.layout = std::move(own);
        }
      }
    }
    uint64_t floor = lo;  // next capacity to try is >= floor
    bool first = true;
    while (lo < hi && floor < hi && !out_of_budget()) {
      const uint64_t capacity = first ? floor : floor + (hi - 1 - floor) / 2;
      first = false;
      const auto now = Clock::now();
      const Clock::time_point slice = now + (deadline_ - now) / 2;
      switch (probe(capacity, slice)) {
        case Outcome::kFound: {
          Layout layout = assemble();
          hi = layout.arena;
          result_.layout = std::move(layout);
          break;
        }
        case Outcome::kInfeasible:
          lo = floor = capacity + 1;
          break;
        case Outcome::kAborted:
          floor = capacity + 1;
          break;
      }
    }
    result_.best_lower_bound = std::min(lo, hi);
    result_.proven_optimal = result_.layout && lo >= hi;
  }

  const LayoutProblem& problem_;
  const ExactOptions& options_;
  ExactResult& result_;
  Clock::time_point start_, deadline_;
  Decomposition d_;
  std::vector<std::optional<LeafModel>> models_;
  std::vector<std::vector<uint64_t>> best_;  // per leaf, offsets relative to its base
  std::vector<uint64_t> top_;                // per leaf arena of best_, kUnbounded: none
};

}  // namespace

ExactResult solve_exact(const LayoutProblem& problem, const ExactOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  ExactResult result;
  Solver(problem, options, result).run();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace memwall
