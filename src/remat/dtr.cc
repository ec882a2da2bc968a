// dtr, dtr-eqclass, dtr-lru, dtr-largest (remat.h): Kirisame, Lyubomirsky,
// Haan, Brennan, He, Roesch, Chen, Tatlock, "Dynamic Tensor
// Rematerialization", ICLR 2021; docs/remat-dtr.md. Also memwall's offline
// variants memwall-lookahead and memwall-lookahead-eqclass (dtr.h, Note
// [Lookahead] in dtr_heuristics.cc): the same loop with another score.
//
// Note [DTR as a planner]
// ~~~~~~~~~~~~~~~~~~~~~~~
// DTR is an online greedy: it runs the ops in execution order and, before
// each one, brings back every missing input by recomputing its producer
// (recursively bringing back that producer's missing inputs first); when
// the outputs and the workspace of the op about to run would exceed the
// budget, it evicts the resident evictable buffer with the lowest score
// until they fit. The planner runs that loop against a model of the
// simulator's device accounting and records what it did as a plan:
//
//   [free victims] recompute p ... [free victims] compute i [frees]
//
// The model is exact for such plans (Note [Simulation model]): a compute
// allocates its missing outputs and its workspace when it starts and the
// workspace goes when it ends, before the next compute starts; a free
// placed before a compute releases at the latest at the end of the compute
// before it (its pending readers), so before the next allocation; a
// recompute re-creates every output its op has that is not on the device,
// needed or not. So the bytes in use when a step starts are the bytes of
// the buffers resident in program order, and keeping those plus the step's
// new outputs and workspace within the budget keeps the simulated peak
// within it.
//
// Frees. A buffer goes after its last use as in the default plan (the
// paper's deallocation when the last reference dies; memwall frees buffers
// that are still recomputable, which is the paper's "eager eviction": they
// stay in the evicted graph). A buffer whose last use is past and that a
// rematerialization brought back (a producer's other output, or an input
// needed only to regenerate another) is freed as soon as no pending op on
// the rematerialization stack reads it.
//
// Locks. The inputs of every op on the stack (the op being run and the
// recomputations under way for it) and the outputs of the op about to run
// are not evicted.
//
// Staleness is measured on a logical clock: one tick per compute or
// recompute step, so s(t) = steps run since t was last created or read
// (at least 1).
//
// What may be evicted: Note [Evictable buffers] (dtr_facts.cc); which is:
// Note [Evicted neighborhood] (dtr_heuristics.cc).
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "dtr.h"
#include "memwall/base/error.h"
#include "memwall/graph/describe.h"
#include "planner_common.h"

namespace memwall {
namespace {

using detail::op_label;
using remat_detail::DtrFacts;
using remat_detail::DtrHeuristic;
using remat_detail::DtrScorer;
using remat_detail::DtrState;

class Dtr {
 public:
  Dtr(const DtrFacts& facts, uint64_t budget, DtrHeuristic heuristic, std::string_view name,
      Deadline deadline)
      : f_(facts),
        g_(facts.graph),
        budget_(budget),
        name_(name),
        s_(facts.graph),
        scorer_(facts, s_, heuristic),
        slot_(g_.buffers.size(), -1),
        recompute_cap_(100 * g_.ops.size() + 10'000),
        deadline_(deadline) {}

  std::vector<Step> run() {
    for (const Buffer& b : g_.buffers) {
      if (exists_before_first_op(b.kind)) make_resident(b.id);
    }
    for (OpId i = 0; i < static_cast<OpId>(g_.ops.size()); ++i) {
      perform(i);
      for (const BufferId b : f_.frees_after(i)) {
        if (s_.resident[b]) free(b, false);
      }
    }
    // What the next iteration does not need goes, as in the default plan.
    for (const Buffer& b : g_.buffers) {
      if (!is_persistent(b.kind) && s_.resident[b.id]) free(b.id, false);
    }
    return std::move(steps_);
  }

  size_t evictions() const { return evictions_; }
  size_t recomputes() const { return recomputes_; }

 private:
  struct Frame {
    OpId op;
    bool recompute;
  };

  void make_resident(BufferId b) {
    s_.resident[b] = 1;
    used_ += g_.buffers[b].bytes;
    if (f_.evictable[b]) {
      slot_[b] = static_cast<int32_t>(candidates_.size());
      candidates_.push_back(b);
    }
    scorer_.on_device(b);
  }

  // Emits `free b`: an eviction, or a free after the last use.
  void free(BufferId b, bool eviction) {
    steps_.push_back(Step::free(b));
    s_.resident[b] = 0;
    used_ -= g_.buffers[b].bytes;
    if (slot_[b] >= 0) {
      const BufferId moved = candidates_.back();
      candidates_[static_cast<size_t>(slot_[b])] = moved;
      slot_[moved] = slot_[b];
      candidates_.pop_back();
      slot_[b] = -1;
    }
    if (eviction) ++evictions_;
    scorer_.left_device(b, eviction);
  }

  void lock_inputs(const Op& op, int delta) {
    for (const BufferId b : op.in) s_.locks[b] += delta;
    for (const BufferId b : op.updates) s_.locks[b] += delta;
  }

  // Runs op i, recomputing what it needs first (Note [DTR as a planner]).
  void perform(OpId i) {
    s_.now = i;
    lock_inputs(g_.ops[i], +1);
    frames_.push_back({i, false});
    while (!frames_.empty()) {
      // A clock read per 1,024 ops run or recomputes pushed costs nothing.
      if (++ticks_ % 1024 == 0 && deadline_.passed()) {
        fail("{}: the time limit ran out at {} after {} recomputations", name_, op_label(g_, i),
             recomputes_);
      }
      const Frame frame = frames_.back();
      const BufferId missing = first_missing(g_.ops[frame.op]);
      if (missing < 0) {
        execute(frame);
        frames_.pop_back();
        continue;
      }
      const OpId producer = f_.producer(missing);
      if (producer == kNoOp || !f_.recomputable[missing] || !s_.done[producer]) {
        fail("{}: {} needs {} again, which is gone for good (internal error)", name_,
             op_label(g_, frame.op), detail::buffer_label(g_, missing));
      }
      if (recomputes_ + frames_.size() > recompute_cap_) {
        fail("{}: more than {} recomputations by {}: DTR thrashes at a budget of {} bytes", name_,
             recompute_cap_, op_label(g_, i), budget_);
      }
      lock_inputs(g_.ops[producer], +1);
      frames_.push_back({producer, true});
    }
  }

  BufferId first_missing(const Op& op) const {
    for (const BufferId b : op.in) {
      if (!s_.resident[b]) return b;
    }
    for (const BufferId b : op.updates) {
      if (!s_.resident[b]) return b;
    }
    return -1;
  }

  void execute(const Frame& frame) {
    const Op& op = g_.ops[frame.op];
    uint64_t need = contiguous_workspace(op);
    for (const BufferId b : op.out) {
      ++s_.locks[b];
      if (!s_.resident[b]) need += g_.buffers[b].bytes;  // recompute re-creates all of them
    }
    while (used_ + need > budget_) {
      const BufferId victim = scorer_.choose(candidates_);
      if (victim < 0) stuck(frame, need);
      free(victim, true);
    }
    steps_.push_back(frame.recompute ? Step::recompute(frame.op) : Step::compute(frame.op));
    if (frame.recompute) ++recomputes_;
    s_.done[frame.op] = 1;
    for (const BufferId b : op.out) {
      if (!s_.resident[b]) make_resident(b);
      s_.last_access[b] = s_.clock;
      --s_.locks[b];
    }
    for (const BufferId b : op.in) s_.last_access[b] = s_.clock;
    for (const BufferId b : op.updates) s_.last_access[b] = s_.clock;
    ++s_.clock;
    lock_inputs(op, -1);
    // What a rematerialization brought back past its last use goes now.
    const auto drop_dead = [&](BufferId b) {
      if (s_.resident[b] && s_.locks[b] == 0 && !s_.live(f_, b)) free(b, false);
    };
    for (const BufferId b : op.in) drop_dead(b);
    for (const BufferId b : op.out) drop_dead(b);
  }

  [[noreturn]] void stuck(const Frame& frame, uint64_t need) const {
    const std::string why =
        frame.recompute ? fmt::format(" (recomputed for {})", op_label(g_, s_.now)) : std::string();
    fail(
        "{}: {}{} cannot run within the budget of {} bytes: with every evictable buffer "
        "evicted, {} bytes stay on the device and it needs {} more; it needs a budget of at "
        "least {} here",
        name_, op_label(g_, frame.op), why, budget_, used_, need, used_ + need);
  }

  const DtrFacts& f_;
  const Graph& g_;
  const uint64_t budget_;
  const std::string_view name_;
  DtrState s_;
  DtrScorer scorer_;
  std::vector<int32_t> slot_;         // index in candidates_, or -1
  std::vector<BufferId> candidates_;  // resident evictable buffers
  std::vector<Frame> frames_;         // the op being run and recomputations for it
  std::vector<Step> steps_;
  uint64_t used_ = 0;  // device bytes, as the simulator counts them
  size_t evictions_ = 0;
  size_t recomputes_ = 0;
  const size_t recompute_cap_;
  const Deadline deadline_;
  size_t ticks_ = 0;
};

RematResult plan(const Graph& graph, const Hardware& hardware, uint64_t budget,
                 const RematOptions& options, DtrHeuristic heuristic, std::string_view name) {
  const remat_detail::Stopwatch clock;
  const Deadline deadline = remat_detail::work_deadline(options);
  const DtrFacts facts(graph, hardware);
  if (facts.floor_bytes > budget) {
    fail(
        "{}: {} needs at least {} bytes while it runs (its inputs, outputs and workspace, and "
        "every buffer DTR may not evict), over the budget of {} by {}",
        name, op_label(graph, facts.floor_op), facts.floor_bytes, budget,
        facts.floor_bytes - budget);
  }
  Dtr dtr(facts, budget, heuristic, name, deadline);
  Plan plan;
  plan.graph = graph.name;
  plan.hardware = hardware.name;
  plan.budget = budget;
  plan.steps = dtr.run();
  const auto evictable =
      static_cast<size_t>(std::count(facts.evictable.begin(), facts.evictable.end(), uint8_t{1}));
  std::string note = fmt::format("{} evictions, {} recomputations ({} evictable buffers)",
                                 dtr.evictions(), dtr.recomputes(), evictable);
  return remat_detail::finish(graph, hardware, budget, std::move(plan), name, std::move(note),
                              clock);
}

}  // namespace

RematResult plan_dtr(const Graph& graph, const Hardware& hardware, uint64_t budget,
                     const RematOptions& options) {
  return plan(graph, hardware, budget, options, DtrHeuristic::kDtr, "dtr");
}

RematResult plan_dtr_eqclass(const Graph& graph, const Hardware& hardware, uint64_t budget,
                             const RematOptions& options) {
  return plan(graph, hardware, budget, options, DtrHeuristic::kEqClass, "dtr-eqclass");
}

RematResult plan_dtr_lru(const Graph& graph, const Hardware& hardware, uint64_t budget,
                         const RematOptions& options) {
  return plan(graph, hardware, budget, options, DtrHeuristic::kLru, "dtr-lru");
}

RematResult plan_dtr_largest(const Graph& graph, const Hardware& hardware, uint64_t budget,
                             const RematOptions& options) {
  return plan(graph, hardware, budget, options, DtrHeuristic::kLargest, "dtr-largest");
}

RematResult plan_dtr_lookahead(const Graph& graph, const Hardware& hardware, uint64_t budget,
                               const RematOptions& options) {
  return plan(graph, hardware, budget, options, DtrHeuristic::kLookahead, "memwall-lookahead");
}

RematResult plan_dtr_lookahead_eqclass(const Graph& graph, const Hardware& hardware,
                                       uint64_t budget, const RematOptions& options) {
  return plan(graph, hardware, budget, options, DtrHeuristic::kLookaheadEqClass,
              "memwall-lookahead-eqclass");
}

}  // namespace memwall
