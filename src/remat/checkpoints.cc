// The checkpointing schedule (checkpoints.h).
//
// Note [Checkpoints as evictions]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Checkpointing is a special case of the builder every planner shares
// (plan_with_evictions, Note [Applying evictions] in src/plan/builders.cc):
// each dropped activation is evicted with "recompute" across the gap from
// its last forward use to its first backward use. When a backward op finds
// it missing, the builder recomputes its producer, first regenerating that
// op's missing inputs back to what is resident (kept checkpoints, other
// saved activations, parameters, inputs still alive); what it regenerates
// stays until its own last use, so a segment is recomputed once, in forward
// order, and intermediates only the recomputation needs are freed right
// away.
//
// Not every activation can come back that way. An op that updates a buffer
// in place cannot be recomputed (MoE's scatter-add into the layer output),
// and a buffer updated in place is not what its producer alone makes; an
// input freed after the forward is gone for good. So a dropped activation
// whose regeneration would need such a buffer is kept instead: one pass in
// forward order marks what the backward can have back (resident through
// the backward, or regenerable from what is) and keeps the droppable
// activations that are neither.
//
// Note [Forward-only gaps]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// A program without backward (inference, a GAN's unrolled generator, a
// custom loop) has no boundary to drop across, but the same schedule holds
// for any activation read again after a gap of other ops
// (read_again_later): a dropped one is freed after the use before its
// largest gap and recomputed before the use after it. One gap per buffer
// keeps an item one recompute, as in training; DTR and Checkmate, which are
// not bound to this schedule, drop across any gap.
//
// What a recompute reads must be there, and cheaply: a buffer the default
// schedule has freed would be regenerated in turn, from what was freed
// before it, back to the program's start (on a forward-only GPT-2, every
// dropped residual recomputed the whole prefix: 6x the iteration). So a
// dropped activation comes back by recomputing its producer from inputs
// that are still alive in the default schedule when its gap ends (or were
// themselves dropped across that point, and come back the same way),
// persistent, or inputs of the program (the builder keeps one a recompute
// reads, Note [Inputs kept for recomputes] in src/plan/builders.cc). An
// input updated in place between the producer and the gap's end would be
// read with new data. A dropped activation for which any of this fails is
// kept; DTR and Checkmate, which price whole chains, may still drop it.
#include "memwall/remat/checkpoints.h"
#include "memwall/graph/versions.h"

#include <algorithm>
#include <optional>

#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/plan/builders.h"

namespace memwall {
namespace {

std::vector<uint8_t> updated_in_place(const Graph& graph) {
  std::vector<uint8_t> updated(graph.buffers.size(), 0);
  for (const Op& op : graph.ops) {
    for (const BufferId b : op.updates) updated[b] = 1;
  }
  return updated;
}

// `keep` with the droppable activations that cannot be regenerated in
// backward added (Note [Checkpoints as evictions]).
std::vector<uint8_t> effective_keep(const Graph& graph, std::span<const uint8_t> keep,
                                    std::span<const uint8_t> droppable,
                                    const std::vector<BufferLife>& lives) {
  std::vector<uint8_t> kept(keep.begin(), keep.end());
  const std::vector<uint8_t> updated = updated_in_place(graph);
  const std::vector<uint8_t> saved = saved_for_backward(graph);
  // available[b]: b can be on the device when a backward op needs it.
  std::vector<uint8_t> available(graph.buffers.size(), 0);
  for (const Buffer& b : graph.buffers) {
    if (!exists_before_first_op(b.kind)) continue;
    const OpId last = lives[b.id].last_use;
    available[b.id] =
        is_persistent(b.kind) || (last != kNoOp && graph.ops[last].phase != Phase::kForward);
  }
  // The forward's gathers count (Note [Gathers replay with the forward]).
  const std::vector<uint8_t> forward = forward_side_ops(graph);
  for (const Op& op : graph.ops) {
    if (!forward[op.id]) continue;
    bool inputs_available = recomputable(graph, op);
    for (const BufferId x : op.in) inputs_available = inputs_available && available[x];
    for (const BufferId b : op.out) {
      const bool regenerable = inputs_available && !updated[b];
      const bool resident = saved[b] && (!droppable[b] || kept[b]);
      if (droppable[b] && !kept[b] && !regenerable) kept[b] = 1;
      available[b] = resident || regenerable || kept[b];
    }
  }
  return kept;
}

// effective_keep for a forward-only program (Note [Forward-only gaps]);
// before[b]: the op ending the gap b is dropped across, kNoOp when kept.
std::vector<uint8_t> effective_keep_forward_only(const Graph& graph, std::span<const uint8_t> keep,
                                                 const std::vector<BufferLife>& lives,
                                                 std::span<const OpId> before) {
  const auto end = static_cast<OpId>(graph.ops.size());
  std::vector<uint8_t> kept(keep.begin(), keep.end());
  std::vector<std::vector<OpId>> updaters(graph.buffers.size());  // in op order
  for (const Op& op : graph.ops) {
    for (const BufferId b : op.updates) updaters[b].push_back(op.id);
  }
  for (const Op& op : graph.ops) {
    for (const BufferId b : op.out) {
      const OpId c = before[b];
      if (c == kNoOp) continue;
      bool ok = recomputable(graph, op) && updaters[b].empty();
      for (const BufferId x : op.in) {
        const OpId freed = lives[x].free_op == kNoOp ? end : lives[x].free_op;
        const auto next = std::upper_bound(updaters[x].begin(), updaters[x].end(), op.id);
        ok = ok && (exists_before_first_op(graph.buffers[x].kind) || freed >= c) &&
             (next == updaters[x].end() || *next >= c);
      }
      if (!ok) kept[b] = 1;
    }
  }
  return kept;
}

// The gap a dropped activation is evicted across: from its last forward use
// to its first backward one, or in a forward-only program its largest gap
// between consecutive uses (Note [Forward-only gaps]).
std::optional<Eviction> drop_gap(const Graph& graph, const BufferUses& uses, BufferId b,
                                 bool backward) {
  if (!backward) {
    std::optional<Eviction> gap = largest_gap(uses, b, 2);
    if (gap) gap->how = Eviction::How::kRecompute;
    return gap;
  }
  OpId after = uses.producer(b);
  OpId before = kNoOp;
  for (const OpId op : uses.of(b)) {
    if (graph.ops[op].phase == Phase::kForward) {
      after = op;
    } else {
      before = op;
      break;
    }
  }
  if (before == kNoOp || after == kNoOp) return std::nullopt;
  return Eviction{.buf = b, .after = after, .before = before, .how = Eviction::How::kRecompute};
}

// Note [Checkpoints are held]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// torch.utils.checkpoint saves its region's inputs: they stay until the
// region's backward has recomputed from them. A kept buffer that backward
// itself does not read (a Llama layer's output: the next layer's RMSNorm
// saves its fp32 copy, the residual add saves nothing) was freed after its
// last forward use by the default schedule, and the first recompute that
// needed it regenerated it from the layer before, and that one from the
// one before: per-layer checkpointing of Llama 3.1 8B (b2, seq 8192)
// regenerated every layer when backward began and held them all (125.8 GiB
// a rank, torchtitan measured 82.4 GiB with less recomputed), and the
// op-level policy recomputed the earlier layers again for each later one
// (1.4 PFLOP). So a planner names its regions' inputs (`hold`), and each
// dropped activation's regeneration is followed back through what it reads
// to the held buffers it reaches, which stay until the op before which it
// is regenerated; what the region computes in between is regenerated, not
// held. GPT-2's layer norms save their input, so its layers' inputs were
// held already.
std::vector<OpId> hold_for_recomputes(const Graph& graph, std::span<const Eviction> evictions,
                                      const std::vector<BufferLife>& lives, const BufferUses& uses,
                                      std::span<const uint8_t> held) {
  std::vector<OpId> hold(graph.buffers.size(), kNoOp);
  std::vector<uint8_t> dropped(graph.buffers.size(), 0);
  for (const Eviction& e : evictions) dropped[e.buf] = 1;
  std::vector<size_t> seen(graph.buffers.size(), 0);  // the eviction that last visited
  std::vector<BufferId> stack;
  for (size_t k = 0; k < evictions.size(); ++k) {
    const Eviction& e = evictions[k];
    stack.assign(1, e.buf);
    while (!stack.empty()) {
      const BufferId b = stack.back();
      stack.pop_back();
      const OpId producer = uses.producer(b);
      if (producer == kNoOp) continue;
      for (const BufferId x : graph.ops[producer].in) {
        if (seen[x] == k + 1) continue;
        seen[x] = k + 1;
        // A gathered parameter is gathered again (Note [Gathers replay with
        // the forward]), as FSDP does, not held.
        const OpId made_by = uses.producer(x);
        const bool gathered = made_by != kNoOp && graph.ops[made_by].phase == Phase::kComm;
        if (held[x] && !gathered && graph.buffers[x].kind == BufferKind::kActivation) {
          if (lives[x].free_op != kNoOp && lives[x].free_op < e.before) {
            hold[x] = std::max(hold[x], e.before);
          }
        } else if (dropped[x] || !exists_before_first_op(graph.buffers[x].kind)) {
          stack.push_back(x);  // regenerated in turn, from what it reads
        }
      }
    }
  }
  return hold;
}

}  // namespace

std::vector<uint8_t> droppable_activations(const Graph& graph) {
  std::vector<uint8_t> droppable = read_again_later(graph);
  const std::vector<uint8_t> updated = updated_in_place(graph);
  for (const Op& op : graph.ops) {
    for (const BufferId b : op.out) {
      if (!recomputable(graph, op) || updated[b]) droppable[b] = 0;
    }
  }
  return droppable;
}

Plan plan_with_checkpoints(const Graph& graph, std::span<const uint8_t> keep, std::string hardware,
                           uint64_t budget, std::span<const uint8_t> hold) {
  if (keep.size() != graph.buffers.size()) {
    fail("remat: checkpoint set has {} entries for {} buffers", keep.size(), graph.buffers.size());
  }
  if (!hold.empty() && hold.size() != graph.buffers.size()) {
    fail("remat: hold set has {} entries for {} buffers", hold.size(), graph.buffers.size());
  }
  const std::vector<uint8_t> droppable = droppable_activations(graph);
  const std::vector<BufferLife> lives = liveness(graph);
  const BufferUses uses(graph);
  const bool backward = has_backward(graph);
  std::vector<std::optional<Eviction>> gaps(graph.buffers.size());
  std::vector<OpId> before(graph.buffers.size(), kNoOp);
  for (const Buffer& buffer : graph.buffers) {
    if (!droppable[buffer.id] || keep[buffer.id]) continue;
    gaps[buffer.id] = drop_gap(graph, uses, buffer.id, backward);
    if (gaps[buffer.id]) before[buffer.id] = gaps[buffer.id]->before;
  }
  const std::vector<uint8_t> kept = backward
                                        ? effective_keep(graph, keep, droppable, lives)
                                        : effective_keep_forward_only(graph, keep, lives, before);
  std::vector<Eviction> evictions;
  for (const Buffer& buffer : graph.buffers) {
    if (gaps[buffer.id] && !kept[buffer.id]) evictions.push_back(*gaps[buffer.id]);
  }
  if (hold.empty()) return plan_with_evictions(graph, evictions, std::move(hardware), budget);
  const std::vector<OpId> until = hold_for_recomputes(graph, evictions, lives, uses, hold);
  return plan_with_evictions(graph, evictions, std::move(hardware), budget, until);
}

uint64_t dropped_bytes(const Graph& graph, std::span<const uint8_t> keep) {
  const std::vector<uint8_t> droppable = droppable_activations(graph);
  uint64_t total = 0;
  for (const Buffer& b : graph.buffers) {
    if (droppable[b.id] && !keep[b.id]) total = checked_add(total, b.bytes, "remat: dropped bytes");
  }
  return total;
}

std::vector<BufferId> candidate_checkpoints(const Graph& graph) {
  const std::vector<uint8_t> droppable = droppable_activations(graph);
  const size_t n = graph.ops.size();
  // Cut c lies between ops c and c + 1. Difference arrays count the forward
  // activations crossing each cut and sum their ids, so a cut crossed by
  // exactly one buffer names it.
  std::vector<int64_t> count(n + 1, 0);
  std::vector<int64_t> id_sum(n + 1, 0);
  // A cut beside a gather of the forward is a cut of the forward (Note
  // [Gathers replay with the forward]): ZeRO-3 puts one before each layer.
  const std::vector<uint8_t> forward = forward_side_ops(graph);
  std::vector<OpId> last_forward_use(graph.buffers.size(), kNoOp);
  for (const Op& op : graph.ops) {
    if (!forward[op.id]) continue;
    for (const BufferId b : op.in) last_forward_use[b] = op.id;
    for (const BufferId b : op.updates) last_forward_use[b] = op.id;
  }
  std::vector<OpId> producer(graph.buffers.size(), kNoOp);
  for (const Op& op : graph.ops) {
    if (!forward[op.id]) continue;
    for (const BufferId b : op.out) {
      producer[b] = op.id;
      const OpId last = last_forward_use[b];
      if (graph.buffers[b].kind != BufferKind::kActivation || last <= op.id) continue;
      count[op.id] += 1;
      count[last] -= 1;
      id_sum[op.id] += b;
      id_sum[last] -= b;
    }
  }
  std::vector<BufferId> candidates;
  std::vector<uint8_t> seen(graph.buffers.size(), 0);
  int64_t crossing = 0;
  int64_t crossing_ids = 0;
  for (size_t c = 0; c + 1 < n; ++c) {
    crossing += count[c];
    crossing_ids += id_sum[c];
    if (!forward[c] || !forward[c + 1]) continue;
    if (crossing != 1) continue;
    const auto b = static_cast<BufferId>(crossing_ids);
    if (droppable[b] && !seen[b]) {
      seen[b] = 1;
      candidates.push_back(b);
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](BufferId x, BufferId y) { return producer[x] < producer[y]; });
  return candidates;
}

double recomputed_flops(const Graph& graph, const Plan& plan) {
  double flops = 0;
  for (const Step& step : plan.steps) {
    if (step.kind == StepKind::kRecompute) flops += graph.ops[step.op].flops;
  }
  return flops;
}

}  // namespace memwall
