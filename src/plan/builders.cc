// Plan builders (builders.h).
//
// Note [Applying evictions]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// The builder walks the default schedule op by op, tracking in program order
// which buffers are on the device and which have a copy on the host or NVMe,
// and emits steps:
//
//   [restore what op i reads but is missing] compute i
//   [default frees after i] [evictions after i] [prefetches after i]
//
// Restoring a missing buffer swaps it in when it has a copy off the device,
// and otherwise recomputes its producer, first restoring that op's missing
// inputs the same way (depth first, iteratively: chains can be long). What a
// recompute brings back stays on the device until its next planned free or
// eviction: a segment of a chain dropped in forward is recomputed once, in
// order, not once per backward op (Chen et al. 2016, section 3). Buffers
// brought back that neither op i nor a later op reads (a producer's side
// outputs, inputs needed only to regenerate others) are freed right after
// the last recompute that reads them, so a chain holds at most what its
// next link needs: freeing them only after op i held a whole segment's
// intermediates at once, and Chen's sqrt(n) plan for VGG-19 peaked above
// keep-all's (issue 19).
//
// A prefetch (the swap_in of a swap eviction) is emitted after the compute
// of `prefetch_after`; one whose buffer is back already is skipped.
//
// Note [Inputs kept for recomputes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// An input (labels, token ids) is freed after its last reader, but a
// recompute can read it later: cross-entropy's log-probabilities dropped in
// forward are regenerated before log_softmax_backward from the logits and
// the labels, whose last reader, nll_loss_backward, ran just before. No op
// can create an input again, so the walk keeps it: when a restore finds an
// input gone, the walk starts over with that input freed only after the op
// that needed it (each input at most once per op, so the walk ends).
//
// Note [Workspaces kept for recomputes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A temp that eager PyTorch never frees (eager_free kNoOp: the cuBLAS
// workspace the first forward matmul allocates and every later one reads,
// Note [cuBLAS workspaces] in python/memwall/tracer/recorder.py) is freed
// after its last reader by the default schedule, but a recompute in
// backward reads it again. Regenerated like an activation, it brought back
// the op that first made it, the first layer's first matmul, and with it
// that layer's whole forward, before every recomputed layer: per-layer
// checkpointing of Llama 3.1 8B recomputed 1.4 PFLOP, more than the
// iteration's model FLOPs, where it should redo one forward. PyTorch keeps
// the workspace for the whole run, so when a restore finds one gone the
// walk starts over with it freed after the last op, as eager holds it.
#include "memwall/plan/builders.h"
#include "memwall/graph/versions.h"

#include <algorithm>
#include <utility>

#include "memwall/base/error.h"
#include "memwall/graph/describe.h"
#include "memwall/graph/graph.h"

namespace memwall {

bool held_workspace(const Graph& graph, BufferId b, OpId producer) {
  const Buffer& buf = graph.buffers[b];
  if (buf.kind != BufferKind::kTemp || buf.eager_free != kNoOp || producer == kNoOp) return false;
  // Made by a kernel beside its output: not a ZeRO gather's or an offload
  // rewrite's buffer, which copy their parameter's eager lifetime.
  const Phase phase = graph.ops[producer].phase;
  return phase == Phase::kForward || phase == Phase::kBackward;
}

BufferUses::BufferUses(const Graph& graph)
    : start_(graph.buffers.size() + 1, 0), producer_(graph.buffers.size(), kNoOp) {
  for (const Op& op : graph.ops) {
    for (const BufferId b : op.out) producer_[b] = op.id;
    for (const BufferId b : op.in) ++start_[b + 1];
    for (const BufferId b : op.updates) ++start_[b + 1];
  }
  for (size_t b = 0; b < graph.buffers.size(); ++b) start_[b + 1] += start_[b];
  ops_.resize(start_.back());
  std::vector<size_t> next(start_.begin(), start_.end() - 1);
  for (const Op& op : graph.ops) {
    // An op listing a buffer twice uses it once.
    const auto add = [&](BufferId b) {
      if (next[b] > start_[b] && ops_[next[b] - 1] == op.id) return;
      ops_[next[b]++] = op.id;
    };
    for (const BufferId b : op.in) add(b);
    for (const BufferId b : op.updates) add(b);
  }
  // Compact away the duplicate slots.
  size_t out = 0;
  for (size_t b = 0; b < graph.buffers.size(); ++b) {
    const size_t begin = start_[b];
    start_[b] = out;
    for (size_t i = begin; i < next[b]; ++i) ops_[out++] = ops_[i];
  }
  start_.back() = out;
  ops_.resize(out);
}

std::optional<Eviction> largest_gap(const BufferUses& uses, BufferId b, OpId min_ops) {
  std::optional<Eviction> best;
  OpId previous = uses.producer(b);
  for (const OpId op : uses.of(b)) {
    if (previous != kNoOp && op - previous >= min_ops &&
        (!best || op - previous > best->before - best->after)) {
      best = Eviction{.buf = b, .after = previous, .before = op};
    }
    previous = op;
  }
  return best;
}

namespace {

using detail::buffer_label;
using detail::op_label;

// Thrown by a walk that found input `buf` gone before op `op` needed it
// (Note [Inputs kept for recomputes]).
struct InputGone {
  BufferId buf = 0;
  OpId op = 0;
};

class Walker {
 public:
  // keep_until[b]: input b is freed no earlier than after that op.
  Walker(const Graph& graph, std::span<const Eviction> evictions,
         const std::vector<OpId>& keep_until)
      : graph_(graph),
        uses_(graph),
        lives_(liveness(graph)),
        keep_until_(keep_until),
        resident_(graph.buffers.size(), 0),
        off_device_(graph.buffers.size(), 0),
        evictions_after_(graph.ops.size()),
        prefetch_after_(graph.ops.size()),
        regenerated_mark_(graph.buffers.size(), 0),
        last_step_(graph.buffers.size(), kKeep) {
    for (const Buffer& b : graph.buffers) resident_[b.id] = exists_before_first_op(b.kind);
    check_and_index(evictions);
  }

  std::vector<Step> run() {
    const auto n = static_cast<OpId>(graph_.ops.size());
    for (OpId i = 0; i < n; ++i) {
      const Op& op = graph_.ops[i];
      const size_t restores = steps_.size();
      for (const BufferId b : op.in) restore(b, i);
      for (const BufferId b : op.updates) restore(b, i);
      free_intermediates(i, restores);
      steps_.push_back(Step::compute(i));
      for (const BufferId b : op.out) resident_[b] = 1;
      drop_regenerated_dead(i);
      default_frees(i);
      for (const Eviction& e : evictions_after_[i]) evict(e);
      for (const BufferId b : prefetch_after_[i]) prefetch(b);
    }
    // What the next iteration does not need goes; persistent buffers stay.
    for (const Buffer& b : graph_.buffers) {
      if (is_persistent(b.kind)) continue;
      if (resident_[b.id] || off_device_[b.id]) free(b.id);
    }
    return std::move(steps_);
  }

 private:
  void check_and_index(std::span<const Eviction> evictions) {
    const auto n_ops = static_cast<OpId>(graph_.ops.size());
    const auto n_buffers = static_cast<BufferId>(graph_.buffers.size());
    std::vector<std::vector<std::pair<OpId, OpId>>> gaps(graph_.buffers.size());
    for (const Eviction& e : evictions) {
      if (e.buf < 0 || e.buf >= n_buffers)
        fail("plan: eviction of buffer {}, which does not exist", e.buf);
      const std::string name = buffer_label(graph_, e.buf);
      if (e.after < 0 || e.before >= n_ops || e.after >= e.before) {
        fail("plan: eviction of {} after op {} until op {}: not a gap of the graph's {} ops", name,
             e.after, e.before, n_ops);
      }
      if (is_persistent(graph_.buffers[e.buf].kind)) {
        fail("plan: eviction of {}: persistent buffers move by placement, not eviction", name);
      }
      if (e.how == Eviction::How::kSwap && e.to == Tier::kDevice) {
        fail("plan: eviction of {}: swaps go to host or nvme", name);
      }
      const std::span<const OpId> used = uses_.of(e.buf);
      const bool after_ok = lives_[e.buf].producer == e.after ||
                            std::binary_search(used.begin(), used.end(), e.after);
      if (!after_ok) fail("plan: eviction of {}: op {} neither creates nor uses it", name, e.after);
      const auto next = std::upper_bound(used.begin(), used.end(), e.after);
      if (next == used.end() || *next != e.before) {
        fail("plan: eviction of {} after op {}: the next op using it is {}, not op {}", name,
             e.after, next == used.end() ? std::string("none") : op_label(graph_, *next), e.before);
      }
      if (e.how == Eviction::How::kRecompute) {
        const OpId producer = lives_[e.buf].producer;
        if (producer == kNoOp) {
          fail("plan: eviction of {}: no op creates it, so it cannot be recomputed", name);
        }
        if (!recomputable(graph_, graph_.ops[producer])) {
          fail(
              "plan: eviction of {}: its producer {} updates a buffer in place and cannot be "
              "recomputed",
              name, op_label(graph_, producer));
        }
      }
      gaps[e.buf].emplace_back(e.after, e.before);
      evictions_after_[e.after].push_back(e);
      if (e.how == Eviction::How::kSwap) {
        const OpId at =
            std::max(e.prefetch_after == kNoOp ? e.before - 1 : e.prefetch_after, e.after);
        if (at >= e.before) {
          fail("plan: eviction of {}: prefetch after op {} is not before op {}", name, at,
               e.before);
        }
        prefetch_after_[at].push_back(e.buf);
      }
    }
    for (size_t b = 0; b < gaps.size(); ++b) {
      std::sort(gaps[b].begin(), gaps[b].end());
      for (size_t k = 1; k < gaps[b].size(); ++k) {
        if (gaps[b][k].first < gaps[b][k - 1].second) {
          fail("plan: evictions of {} overlap (after op {} and after op {})",
               buffer_label(graph_, static_cast<BufferId>(b)), gaps[b][k - 1].first,
               gaps[b][k].first);
        }
      }
    }
  }

  bool used_after(BufferId b, OpId i) const {
    const std::span<const OpId> used = uses_.of(b);
    return !used.empty() && used.back() > i;
  }

  // A free drops the device copy if there is one, else the others (Note
  // [Simulation model]); a buffer regenerated while a copy of it waited off
  // the device has both.
  void free(BufferId b) {
    if (resident_[b]) steps_.push_back(Step::free(b));
    if (off_device_[b]) steps_.push_back(Step::free(b));
    resident_[b] = 0;
    off_device_[b] = 0;
  }

  // Brings b back to the device before op i (see Note [Applying evictions]).
  void restore(BufferId root, OpId i) {
    if (resident_[root]) return;
    stack_.push_back(root);
    while (!stack_.empty()) {
      const BufferId b = stack_.back();
      if (resident_[b]) {
        stack_.pop_back();
        continue;
      }
      if (off_device_[b]) {
        steps_.push_back(Step::swap_in(b));
        off_device_[b] = 0;
        resident_[b] = 1;
        stack_.pop_back();
        continue;
      }
      const OpId producer = lives_[b].producer;
      if (producer == kNoOp && graph_.buffers[b].kind == BufferKind::kInput && keep_until_[b] < i) {
        throw InputGone{b, i};
      }
      // Note [Workspaces kept for recomputes]: held to the end instead.
      const auto last = static_cast<OpId>(graph_.ops.size()) - 1;
      if (held_workspace(graph_, b, producer) && keep_until_[b] < last) throw InputGone{b, last};
      if (producer == kNoOp) {
        fail("plan: {} needs {} before op {}, but it is gone and no op creates it",
             op_label(graph_, i), buffer_label(graph_, b), i);
      }
      const Op& op = graph_.ops[producer];
      if (!recomputable(graph_, op)) {
        fail(
            "plan: {} is needed again before op {}, but its producer {} updates a buffer in "
            "place and cannot be recomputed",
            buffer_label(graph_, b), i, op_label(graph_, producer));
      }
      bool ready = true;
      for (const BufferId x : op.in) {
        if (!resident_[x]) {
          if (stack_.size() > graph_.buffers.size()) fail("plan: recompute chain too deep");
          stack_.push_back(x);
          ready = false;
          break;
        }
      }
      if (!ready) continue;
      steps_.push_back(Step::recompute(producer));
      for (const BufferId out : op.out) {
        if (resident_[out]) continue;
        resident_[out] = 1;
        if (!regenerated_mark_[out]) {
          regenerated_mark_[out] = 1;
          regenerated_.push_back(out);
        }
      }
      stack_.pop_back();
    }
  }

  // Regenerated buffers that neither op i nor any later op reads (inputs
  // needed only to regenerate others, a producer's side outputs) are freed
  // right after the last recompute, among the restores of op i from step
  // `first` on, that reads them, or after the one that made them: a chain
  // of recomputes holds at most what it needs, not every link until op i
  // (Note [Applying evictions]).
  void free_intermediates(OpId i, size_t first) {
    if (regenerated_.empty()) return;
    const Op& op = graph_.ops[i];
    const auto read_by_op = [&](BufferId b) {
      return std::find(op.in.begin(), op.in.end(), b) != op.in.end() ||
             std::find(op.updates.begin(), op.updates.end(), b) != op.updates.end();
    };
    // last_step_[b]: for the buffers to free, one past the last restore step
    // that makes or reads them; kKeep for every other buffer, always.
    bool any = false;
    for (const BufferId b : regenerated_) {
      if (resident_[b] && !used_after(b, i) && lives_[b].free_op != kNoOp && !read_by_op(b)) {
        last_step_[b] = first;
        any = true;
      }
    }
    if (!any) return;
    for (size_t s = first; s < steps_.size(); ++s) {
      if (steps_[s].kind != StepKind::kRecompute) continue;
      const Op& p = graph_.ops[steps_[s].op];
      for (const BufferId x : p.in) {
        if (last_step_[x] != kKeep) last_step_[x] = s + 1;
      }
      for (const BufferId x : p.out) {
        if (last_step_[x] != kKeep) last_step_[x] = std::max(last_step_[x], s + 1);
      }
    }
    std::vector<std::vector<BufferId>> frees_after(steps_.size() - first);
    for (const BufferId b : regenerated_) {
      if (last_step_[b] == kKeep) continue;
      // Not made here (never so: regenerated_ holds this op's restores), it
      // is left to drop_regenerated_dead.
      if (last_step_[b] > first) frees_after[last_step_[b] - 1 - first].push_back(b);
      last_step_[b] = kKeep;
    }
    std::vector<Step> tail(steps_.begin() + static_cast<std::ptrdiff_t>(first), steps_.end());
    steps_.resize(first);
    for (size_t k = 0; k < tail.size(); ++k) {
      steps_.push_back(tail[k]);
      for (const BufferId b : frees_after[k]) free(b);
    }
  }

  // Regenerated buffers nobody needs after op i go right away.
  void drop_regenerated_dead(OpId i) {
    for (const BufferId b : regenerated_) {
      regenerated_mark_[b] = 0;
      if (resident_[b] && !used_after(b, i) && lives_[b].free_op != kNoOp) free(b);
    }
    regenerated_.clear();
  }

  void default_frees(OpId i) {
    for (const BufferId b : frees_at(i)) {
      if (resident_[b] || off_device_[b]) free(b);
    }
  }

  // Buffers whose default free comes after op i.
  std::span<const BufferId> frees_at(OpId i) {
    if (free_start_.empty()) {
      std::vector<OpId> free_op(lives_.size());
      for (size_t b = 0; b < lives_.size(); ++b) {
        free_op[b] =
            lives_[b].free_op == kNoOp ? kNoOp : std::max(lives_[b].free_op, keep_until_[b]);
      }
      free_start_.assign(graph_.ops.size() + 1, 0);
      for (const OpId f : free_op) {
        if (f != kNoOp) ++free_start_[f + 1];
      }
      for (size_t k = 0; k < graph_.ops.size(); ++k) free_start_[k + 1] += free_start_[k];
      free_list_.resize(free_start_.back());
      std::vector<size_t> next(free_start_.begin(), free_start_.end() - 1);
      for (size_t b = 0; b < free_op.size(); ++b) {
        if (free_op[b] != kNoOp) free_list_[next[free_op[b]]++] = static_cast<BufferId>(b);
      }
    }
    return {free_list_.data() + free_start_[i], free_list_.data() + free_start_[i + 1]};
  }

  void evict(const Eviction& e) {
    if (!resident_[e.buf]) return;  // already gone
    if (e.how == Eviction::How::kSwap && !off_device_[e.buf]) {
      steps_.push_back(Step::swap_out(e.buf, e.to));
      resident_[e.buf] = 0;
      off_device_[e.buf] = 1;
    } else {
      steps_.push_back(Step::free(e.buf));
      resident_[e.buf] = 0;
    }
  }

  void prefetch(BufferId b) {
    if (resident_[b] || !off_device_[b]) return;
    steps_.push_back(Step::swap_in(b));
    off_device_[b] = 0;
    resident_[b] = 1;
  }

  const Graph& graph_;
  const BufferUses uses_;
  const std::vector<BufferLife> lives_;
  const std::vector<OpId>& keep_until_;
  std::vector<uint8_t> resident_;    // on the device, in program order
  std::vector<uint8_t> off_device_;  // has a copy on the host or NVMe
  std::vector<std::vector<Eviction>> evictions_after_;
  std::vector<std::vector<BufferId>> prefetch_after_;
  std::vector<uint8_t> regenerated_mark_;
  std::vector<BufferId> regenerated_;
  static constexpr size_t kKeep = ~size_t{0};
  std::vector<size_t> last_step_;  // free_intermediates' scratch, kKeep between calls
  std::vector<BufferId> stack_;
  std::vector<size_t> free_start_;
  std::vector<BufferId> free_list_;
  std::vector<Step> steps_;
};

}  // namespace

Plan plan_with_evictions(const Graph& graph, std::span<const Eviction> evictions,
                         std::string hardware, uint64_t budget, std::span<const OpId> hold_until) {
  Plan plan;
  plan.graph = graph.name;
  plan.hardware = std::move(hardware);
  plan.budget = budget;
  std::vector<OpId> keep_until(graph.buffers.size(), kNoOp);
  if (!hold_until.empty()) {
    if (hold_until.size() != graph.buffers.size()) {
      fail("plan: {} buffers to hold for {} buffers", hold_until.size(), graph.buffers.size());
    }
    keep_until.assign(hold_until.begin(), hold_until.end());
  }
  while (true) {
    try {
      plan.steps = Walker(graph, evictions, keep_until).run();
      return plan;
    } catch (const InputGone& gone) {
      keep_until[gone.buf] = gone.op;  // grows each time: the loop ends
    }
  }
}

Plan default_plan(const Graph& graph, std::string hardware, uint64_t budget) {
  return plan_with_evictions(graph, {}, std::move(hardware), budget);
}

}  // namespace memwall
