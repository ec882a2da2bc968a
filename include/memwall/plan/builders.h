// Plan builders shared by every planner: the default plan, and the plan of
// the default schedule with given buffers evicted across given gaps (swapped
// out and back in, or dropped and recomputed).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "memwall/graph/types.h"
#include "memwall/plan/plan.h"

namespace memwall {

// Compute every op in order; free each buffer right after its last reader
// (liveness' free_op, so the simulated peak equals memory_profile's);
// buffers still allocated at the end that the next iteration does not need
// (grads, unfreed inputs) are freed after the last op.
Plan default_plan(const Graph& graph, std::string hardware, uint64_t budget);

// The ops that use each buffer (read or update it), in order: a CSR table.
class BufferUses {
 public:
  explicit BufferUses(const Graph& graph);
  std::span<const OpId> of(BufferId b) const {
    return {ops_.data() + start_[b], ops_.data() + start_[b + 1]};
  }
  OpId producer(BufferId b) const { return producer_[b]; }  // kNoOp: none

 private:
  std::vector<size_t> start_;
  std::vector<OpId> ops_;
  std::vector<OpId> producer_;
};

// One gap in a buffer's residency: absent from the device after op `after`
// (its producer or a user) until op `before` (a user) needs it again; no op
// strictly between them uses it.
struct Eviction {
  enum class How : uint8_t { kSwap, kRecompute };
  BufferId buf = -1;
  OpId after = kNoOp;
  OpId before = kNoOp;
  How how = How::kSwap;
  Tier to = Tier::kHost;  // swaps: host or nvme
  // Swaps: the swap_in is issued after this op's compute (so it overlaps
  // it; see Note [Simulation model]). kNoOp: after op `before - 1`. Clamped
  // to after `after`.
  OpId prefetch_after = kNoOp;
};

// The largest gap between consecutive uses of b (producer included), or
// nullopt when b is used by fewer than two ops or every gap is < min_ops
// (before - after). How and where are left at their defaults.
std::optional<Eviction> largest_gap(const BufferUses& uses, BufferId b, OpId min_ops = 2);

// The default plan with each eviction applied (see Note [Applying evictions]
// in builders.cc): swap_out after `after` (frees on completion) and swap_in
// before `before`; or free after `after` and recompute the producer before
// `before`, regenerating first any input of it that is evicted at that point
// (recursively) and dropping those again right after. Throws Error for an
// eviction that does not fit the graph: unknown ids, a use inside the gap,
// overlapping gaps of one buffer, a persistent buffer (use placement), or a
// recompute of a buffer whose producer updates a buffer in place.
// `hold_until` (empty, or one entry per buffer): buffer b is freed no
// earlier than after op hold_until[b] (kNoOp: its default free), so that a
// recompute can read it there (Note [Checkpoints are held] in
// src/remat/checkpoints.cc).
// A workspace eager PyTorch keeps for the whole run: a temp a forward or
// backward kernel makes beside its output that the trace says is never
// freed (the cuBLAS workspace); a recompute finds it held (Note
// [Workspaces kept for recomputes] in builders.cc). `producer` is b's.
bool held_workspace(const Graph& graph, BufferId b, OpId producer);

Plan plan_with_evictions(const Graph& graph, std::span<const Eviction> evictions,
                         std::string hardware, uint64_t budget,
                         std::span<const OpId> hold_until = {});

}  // namespace memwall
