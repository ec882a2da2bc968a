// DTR (Kirisame et al. 2021) as a planner: the pieces shared by dtr.cc (the
// online loop, Note [DTR as a planner]), dtr_facts.cc (what does not change
// while it runs, Note [Evictable buffers]) and dtr_heuristics.cc (eviction
// scores, Note [Evicted neighborhood], Note [Lookahead]). Internal to
// src/remat; docs/remat-dtr.md.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/plan/builders.h"
#include "memwall/remat/remat.h"

namespace memwall {

// memwall's offline variant of DTR (Note [Lookahead]): the same loop, with
// the staleness of h_DTR replaced by the distance to the next use in the
// known op order. Part of memwall's planner, not a registered baseline;
// the result's planner is "memwall-lookahead" (errors start with it).
RematResult plan_dtr_lookahead(const Graph& graph, const Hardware& hardware, uint64_t budget,
                               const RematOptions& options);
// The same with h_DTR-eq's equivalence-class cost ("memwall-lookahead-eqclass").
RematResult plan_dtr_lookahead_eqclass(const Graph& graph, const Hardware& hardware,
                                       uint64_t budget, const RematOptions& options);

}  // namespace memwall

namespace memwall::remat_detail {

// kLookahead and kLookaheadEqClass are memwall's (Note [Lookahead]), not
// the paper's.
enum class DtrHeuristic : uint8_t { kDtr, kEqClass, kLru, kLargest, kLookahead, kLookaheadEqClass };

// What does not change while DTR runs (Note [Evictable buffers]).
struct DtrFacts {
  DtrFacts(const Graph& g, const Hardware& hw);

  std::span<const BufferId> frees_after(OpId i) const {
    return {free_list.data() + free_start[i], free_list.data() + free_start[i + 1]};
  }
  OpId producer(BufferId b) const { return lives[b].producer; }

  const Graph& graph;
  const BufferUses uses;
  const std::vector<BufferLife> lives;
  std::vector<double> cost;           // per op: the cost model's time
  std::vector<uint8_t> recomputable;  // per buffer: its producer can re-create it
  std::vector<uint8_t> evictable;     // per buffer
  std::vector<uint8_t> relevant;      // per buffer: may be recomputed to bring one back
  std::vector<size_t> free_start;     // CSR: buffers whose default free follows op i
  std::vector<BufferId> free_list;
  uint64_t floor_bytes = 0;  // what the hungriest op holds with everything evicted
  OpId floor_op = kNoOp;
};

// The loop's state the heuristics read (program order).
struct DtrState {
  explicit DtrState(const Graph& g)
      : resident(g.buffers.size(), 0),
        done(g.ops.size(), 0),
        locks(g.buffers.size(), 0),
        last_access(g.buffers.size(), 0) {}

  // Not past its default free (the op being run counts as not past).
  bool live(const DtrFacts& facts, BufferId b) const {
    const OpId free_op = facts.lives[b].free_op;
    return free_op == kNoOp || free_op >= now;
  }

  std::vector<uint8_t> resident;
  std::vector<uint8_t> done;  // per op: computed
  std::vector<uint32_t> locks;
  std::vector<uint64_t> last_access;  // clock of its last creation or read
  uint64_t clock = 0;                 // compute and recompute steps run
  OpId now = 0;                       // the op being run (not a recomputation)
};

// Chooses victims (Note [Evicted neighborhood]) and keeps the equivalence
// classes of h_DTR-eq up to date.
class DtrScorer {
 public:
  DtrScorer(const DtrFacts& facts, const DtrState& state, DtrHeuristic heuristic);

  // The unlocked candidate with the lowest score, or -1.
  BufferId choose(std::span<const BufferId> candidates);
  // b has just left the device: evicted, or freed after its last use.
  void left_device(BufferId b, bool eviction);
  // b has just come (back) to the device.
  void on_device(BufferId b) { node_[b] = -1; }

 private:
  double staleness(BufferId b) const;
  double distance(BufferId b);
  double bytes(BufferId b) const;
  double weight(BufferId b);
  bool uses_classes() const;
  bool better(double score, BufferId b, double best_score, BufferId best) const;
  bool absent_relevant(BufferId b) const;
  double projected_cost(BufferId t);
  double class_cost(BufferId t);
  int32_t find(int32_t x);
  void unite(int32_t a, int32_t b);
  template <typename Fn>
  void for_each_neighbour(BufferId b, Fn&& fn) const;

  const DtrFacts& f_;
  const DtrState& s_;
  const DtrHeuristic heuristic_;
  std::vector<uint32_t> next_use_;      // lookahead: cursor into f_.uses.of(b)
  std::vector<int32_t> node_;           // union-find node of an evicted buffer, or -1
  std::vector<int32_t> parent_, size_;  // union-find
  std::vector<double> class_cost_;
  std::vector<uint32_t> mark_, op_mark_;
  uint32_t epoch_ = 0;
  std::vector<BufferId> stack_;
  std::vector<int32_t> roots_;
  std::vector<std::pair<double, BufferId>> order_;
};

}  // namespace memwall::remat_detail
