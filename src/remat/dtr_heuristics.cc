// DTR's eviction heuristics (dtr.h).
//
// Note [Evicted neighborhood]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Lower scores are evicted first. h_DTR(t) = c(e*(t)) / (m(t) s(t)): m is
// the buffer's bytes, s its staleness on the logical clock (Note [DTR as a
// planner]), c the cost model's time of t's producer plus that of every op
// of its evicted neighborhood e*(t), each op once: the evicted buffers a
// rematerialization of t would recompute (absent relevant ancestors,
// through absent ones, back to resident ones) and the evicted buffers
// whose rematerialization would need t (absent relevant descendants,
// through absent ones). An evicted activation past its last use is
// banished (the paper's term: it leaves the evicted graph), so the
// descendants side does not count it; a forward temporary freed after its
// last use stays (the paper's eager eviction: it can still be recomputed).
// Since c(e*(t)) >= c(t), candidates are visited by c(t) / (m s) and the
// search stops once that bound cannot beat the best score.
//
// h_DTR-eq replaces e* by the paper's union-find approximation: a buffer
// entering the evicted graph becomes a class merged with the classes of
// its evicted neighbours (producer's inputs, users' outputs), each class
// summing its members' costs; a rematerialized buffer leaves its class
// without splitting it (union-find cannot), so classes overestimate.
// h(t) = (c(t) + the costs of the distinct classes adjacent to t) / (m s).
//
// LRU scores 1 / s, largest-first 1 / m. Ties go to the staler buffer,
// then to the lower id.
//
// Note [Lookahead]
// ~~~~~~~~~~~~~~~~
// Not the paper's: memwall plans offline, so it knows the whole op order,
// which DTR cannot. The lookahead heuristics replace the staleness s(t) by
// the distance d(t) = (index of t's next use after the op being run, in
// the default op order) - (index of the op being run):
//   h_LA(t) = c(e*(t)) / (m(t) d(t)),  h_LA-eq with the classes' cost,
// Belady's MIN (evict what is needed furthest in the future) weighed by
// the cost of bringing t back and the bytes it frees. A buffer with no use
// left has d = infinity and scores 0 (such buffers are normally freed
// already). The distance counts from the op being run even inside a
// rematerialization for it: the recomputations run "now", before that op,
// and the inputs of every op on the stack are locked anyway. What it does
// not see: a buffer may be needed sooner than its next use to regenerate
// another one that is evicted (the e* of the neighbours accounts for the
// cost, not the time). Each buffer keeps a cursor into its sorted uses
// (BufferUses), moved forward past the op being run when it is scored:
// O(1) amortized per score, as the op being run only moves forward. The
// candidate pruning by c(t) / (m d) is that of h_DTR.
#include <algorithm>
#include <limits>

#include "dtr.h"

namespace memwall::remat_detail {
namespace {

bool lookahead(DtrHeuristic h) {
  return h == DtrHeuristic::kLookahead || h == DtrHeuristic::kLookaheadEqClass;
}

}  // namespace

DtrScorer::DtrScorer(const DtrFacts& facts, const DtrState& state, DtrHeuristic heuristic)
    : f_(facts),
      s_(state),
      heuristic_(heuristic),
      next_use_(lookahead(heuristic) ? facts.graph.buffers.size() : 0, 0),
      node_(facts.graph.buffers.size(), -1),
      mark_(facts.graph.buffers.size(), 0),
      op_mark_(facts.graph.ops.size(), 0) {}

double DtrScorer::staleness(BufferId b) const {
  return static_cast<double>(s_.clock - s_.last_access[b]);
}

double DtrScorer::bytes(BufferId b) const { return static_cast<double>(f_.graph.buffers[b].bytes); }

// Ops from the one being run to b's next use in the default order
// (infinite when there is none). The cursor only moves forward, as the op
// being run does, so a query costs O(1) amortized.
double DtrScorer::distance(BufferId b) {
  const std::span<const OpId> uses = f_.uses.of(b);
  uint32_t& next = next_use_[b];
  while (next < uses.size() && uses[next] <= s_.now) ++next;
  if (next == uses.size()) return std::numeric_limits<double>::infinity();
  return static_cast<double>(uses[next] - s_.now);
}

// The denominator of the cost-based scores: m s, or m d for the lookahead.
double DtrScorer::weight(BufferId b) {
  return bytes(b) * (lookahead(heuristic_) ? distance(b) : staleness(b));
}

bool DtrScorer::uses_classes() const {
  return heuristic_ == DtrHeuristic::kEqClass || heuristic_ == DtrHeuristic::kLookaheadEqClass;
}

bool DtrScorer::better(double score, BufferId b, double best_score, BufferId best) const {
  if (best < 0) return true;
  if (score != best_score) return score < best_score;
  if (s_.last_access[b] != s_.last_access[best]) return s_.last_access[b] < s_.last_access[best];
  return b < best;
}

BufferId DtrScorer::choose(std::span<const BufferId> candidates) {
  BufferId best = -1;
  double best_score = 0;
  if (heuristic_ != DtrHeuristic::kDtr && heuristic_ != DtrHeuristic::kLookahead) {
    for (const BufferId b : candidates) {
      if (s_.locks[b] != 0) continue;
      double score = 0;
      if (heuristic_ == DtrHeuristic::kLru) {
        score = 1 / staleness(b);
      } else if (heuristic_ == DtrHeuristic::kLargest) {
        score = 1 / bytes(b);
      } else {
        score = class_cost(b) / weight(b);
      }
      if (better(score, b, best_score, best)) {
        best = b;
        best_score = score;
      }
    }
    return best;
  }
  order_.clear();
  for (const BufferId b : candidates) {
    if (s_.locks[b] == 0) order_.emplace_back(f_.cost[f_.producer(b)] / weight(b), b);
  }
  std::sort(order_.begin(), order_.end(), [&](const auto& x, const auto& y) {
    return better(x.first, x.second, y.first, y.second);
  });
  for (const auto& [bound, b] : order_) {
    if (best >= 0 && bound > best_score) break;
    const double score = projected_cost(b) / weight(b);
    if (better(score, b, best_score, best)) {
      best = b;
      best_score = score;
    }
  }
  return best;
}

// In the evicted graph: absent, computed, and recomputable for some
// evictable buffer.
bool DtrScorer::absent_relevant(BufferId b) const {
  return f_.relevant[b] && !s_.resident[b] && s_.done[f_.producer(b)];
}

double DtrScorer::projected_cost(BufferId t) {
  if (++epoch_ == 0) {
    std::fill(mark_.begin(), mark_.end(), 0);
    std::fill(op_mark_.begin(), op_mark_.end(), 0);
    epoch_ = 1;
  }
  double total = 0;
  const auto add_op = [&](OpId op) {
    if (op_mark_[op] == epoch_) return;
    op_mark_[op] = epoch_;
    total += f_.cost[op];
  };
  const Graph& g = f_.graph;
  add_op(f_.producer(t));
  mark_[t] = epoch_;
  stack_.assign(1, t);
  while (!stack_.empty()) {  // what a rematerialization of t recomputes
    const BufferId b = stack_.back();
    stack_.pop_back();
    for (const BufferId x : g.ops[f_.producer(b)].in) {
      if (mark_[x] == epoch_ || !absent_relevant(x)) continue;
      mark_[x] = epoch_;
      add_op(f_.producer(x));
      stack_.push_back(x);
    }
  }
  stack_.assign(1, t);
  while (!stack_.empty()) {  // the evicted buffers that would need t
    const BufferId b = stack_.back();
    stack_.pop_back();
    for (const OpId user : f_.uses.of(b)) {
      if (user > s_.now) break;
      for (const BufferId o : g.ops[user].out) {
        if (mark_[o] == epoch_ || !absent_relevant(o)) continue;
        if (f_.evictable[o] && !s_.live(f_, o)) continue;  // banished
        mark_[o] = epoch_;
        add_op(user);
        stack_.push_back(o);
      }
    }
  }
  return total;
}

// ---- Equivalence classes (union-find) ---------------------------------------------

int32_t DtrScorer::find(int32_t x) {
  while (parent_[x] != x) {
    parent_[x] = parent_[parent_[x]];
    x = parent_[x];
  }
  return x;
}

void DtrScorer::unite(int32_t a, int32_t b) {
  a = find(a);
  b = find(b);
  if (a == b) return;
  if (size_[a] < size_[b]) std::swap(a, b);
  parent_[b] = a;
  size_[a] += size_[b];
  class_cost_[a] += class_cost_[b];
}

template <typename Fn>
void DtrScorer::for_each_neighbour(BufferId b, Fn&& fn) const {
  const Graph& g = f_.graph;
  for (const BufferId x : g.ops[f_.producer(b)].in) fn(x);
  for (const OpId user : f_.uses.of(b)) {
    if (user > s_.now) break;
    for (const BufferId o : g.ops[user].out) fn(o);
  }
}

void DtrScorer::left_device(BufferId b, bool eviction) {
  if (!uses_classes()) return;
  if (!eviction && (!f_.relevant[b] || f_.evictable[b])) return;  // banished
  const auto node = static_cast<int32_t>(parent_.size());
  parent_.push_back(node);
  size_.push_back(1);
  class_cost_.push_back(f_.cost[f_.producer(b)]);
  node_[b] = node;
  for_each_neighbour(b, [&](BufferId x) {
    if (node_[x] >= 0) unite(node, node_[x]);
  });
}

double DtrScorer::class_cost(BufferId t) {
  double total = f_.cost[f_.producer(t)];
  roots_.clear();
  for_each_neighbour(t, [&](BufferId x) {
    if (node_[x] < 0) return;
    const int32_t root = find(node_[x]);
    if (std::find(roots_.begin(), roots_.end(), root) != roots_.end()) return;
    roots_.push_back(root);
    total += class_cost_[root];
  });
  return total;
}

}  // namespace memwall::remat_detail
