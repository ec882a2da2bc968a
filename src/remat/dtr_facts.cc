// What DTR knows before it runs (dtr.h).
//
// Note [Evictable buffers]
// ~~~~~~~~~~~~~~~~~~~~~~~~
// The paper evicts every tensor but constants. Here the evictable set is
// the one every memwall planner uses, droppable_activations() (saved for
// backward, not updated in place, produced by an op that updates nothing:
// the rest lives for a few ops, or cannot be recomputed), restricted to
// the buffers whose recomputation can never need something gone for good.
// horizon[b] is the last op before which b can always be had: resident, or
// recomputable from buffers that can be had. For a persistent buffer it is
// the end; for one that cannot be recomputed (an input, an output of an
// op with `updates`, a buffer updated in place), its default free; for a
// recomputable one, the least horizon of its producer's inputs, also
// bounded by the next in-place update of each input (recomputing after it
// would read new data), or its default free when it is never evicted and
// that comes later. An activation is evictable when that regeneration
// horizon reaches its last use. The recomputable buffers reached from the
// evictable ones through producers' inputs are the "relevant" ones: the
// only ones a rematerialization ever recomputes.
//
// The floor of op i is what stays on the device while it runs whatever DTR
// evicts: every buffer DTR never evicts that the default schedule has
// alive at i, the evictable buffers i reads or creates, and i's workspace.
// No budget below the largest floor can work, so DTR declines it up front.
#include <algorithm>

#include "dtr.h"
#include "memwall/graph/versions.h"
#include "memwall/remat/checkpoints.h"

namespace memwall::remat_detail {

DtrFacts::DtrFacts(const Graph& g, const Hardware& hw) : graph(g), uses(g), lives(liveness(g)) {
  const size_t n = g.ops.size();
  const size_t nb = g.buffers.size();
  const auto end = static_cast<OpId>(n);
  cost.reserve(n);
  for (const Op& op : g.ops) cost.push_back(op_time(hw, g, op));

  std::vector<std::vector<OpId>> updaters(nb);  // in execution order
  for (const Op& op : g.ops) {
    for (const BufferId b : op.updates) updaters[b].push_back(op.id);
  }
  const auto freed = [&](BufferId b) { return lives[b].free_op == kNoOp ? end : lives[b].free_op; };
  const std::vector<uint8_t> droppable = droppable_activations(g);
  std::vector<OpId> horizon(nb, end);
  recomputable.assign(nb, 0);
  evictable.assign(nb, 0);
  for (const Buffer& b : g.buffers) {
    if (exists_before_first_op(b.kind) && !is_persistent(b.kind)) horizon[b.id] = freed(b.id);
  }
  for (const Op& op : g.ops) {
    OpId regen = end;
    for (const BufferId x : op.in) {
      regen = std::min(regen, horizon[x]);
      const auto next = std::upper_bound(updaters[x].begin(), updaters[x].end(), op.id);
      if (next != updaters[x].end()) regen = std::min(regen, *next);
    }
    for (const BufferId b : op.out) {
      if (!memwall::recomputable(g, op) || !updaters[b].empty()) {
        horizon[b] = freed(b);
        continue;
      }
      recomputable[b] = 1;
      const OpId last = lives[b].last_use;
      evictable[b] = droppable[b] && g.buffers[b].bytes > 0 && last != kNoOp && regen >= last;
      horizon[b] = evictable[b] ? regen : std::max(freed(b), regen);
    }
  }
  relevant = evictable;
  for (size_t i = n; i-- > 0;) {
    const Op& op = g.ops[i];
    const bool needed =
        std::any_of(op.out.begin(), op.out.end(), [&](BufferId b) { return relevant[b] != 0; });
    if (!needed) continue;
    for (const BufferId x : op.in) {
      if (recomputable[x]) relevant[x] = 1;
    }
  }

  free_start.assign(n + 1, 0);
  for (const BufferLife& life : lives) {
    if (life.free_op != kNoOp) ++free_start[life.free_op + 1];
  }
  for (size_t i = 0; i < n; ++i) free_start[i + 1] += free_start[i];
  free_list.resize(free_start.back());
  std::vector<size_t> next(free_start.begin(), free_start.end() - 1);
  for (size_t b = 0; b < nb; ++b) {
    if (lives[b].free_op != kNoOp) free_list[next[lives[b].free_op]++] = static_cast<BufferId>(b);
  }

  // Floors; unsigned wrap-around keeps the running sum exact.
  if (n == 0) return;
  std::vector<uint64_t> delta(n + 1, 0);
  for (const Buffer& b : g.buffers) {
    if (evictable[b.id]) continue;
    const BufferLife& life = lives[b.id];
    const size_t from = life.alloc_op == kNoOp ? 0 : static_cast<size_t>(life.alloc_op);
    const size_t to = life.free_op == kNoOp ? n - 1 : static_cast<size_t>(life.free_op);
    delta[from] += b.bytes;
    delta[to + 1] -= b.bytes;
  }
  uint64_t alive = 0;
  for (const Op& op : g.ops) {
    alive += delta[op.id];
    uint64_t bytes = alive + contiguous_workspace(op);
    for (size_t k = 0; k < op.in.size(); ++k) {
      const BufferId b = op.in[k];
      const BufferId* first = op.in.data();
      if (evictable[b] && std::find(first, first + k, b) == first + k) bytes += g.buffers[b].bytes;
    }
    for (const BufferId b : op.out) bytes += evictable[b] ? g.buffers[b].bytes : 0;
    if (bytes > floor_bytes) {
      floor_bytes = bytes;
      floor_op = op.id;
    }
  }
}

}  // namespace memwall::remat_detail
