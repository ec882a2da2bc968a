// Buffer versions (versions.h).
//
// Note [Buffer versions]
// ~~~~~~~~~~~~~~~~~~~~~~
// PyTorch code mutates activations in place everywhere (ReLU(inplace=True),
// residual add_, in-place dropout, autograd's gradient accumulation). A
// buffer that an op updates cannot simply be dropped and recomputed: its
// producer's replay gives the value before the update. As in DTR's simulator
// (Kirisame et al. 2021, section 4: "mutation ... as creating a new tensor"),
// memwall gives such a buffer versions. The op that updates version k reads
// it and creates version k+1, a buffer of its own (`version_of` = k), so
// that every version can be dropped and regenerated like any activation:
// version k+1 by replaying the in-place op on version k, which must then be
// resident (regenerated itself if need be).
//
// Memory. A version takes over its predecessor's storage when the
// predecessor is not needed after the op (it dies there): the op ran in
// place and allocated nothing. When the plan still needs version k after
// the op (it keeps it for a later replay, or swaps it out afterwards), the
// op runs out of place: version k+1 gets storage of its own, which is what a
// runtime does by copying version k first. The default schedule and the
// simulator apply this rule (graph/memory.cc, sim/simulator.cc); planners
// that do not model it overestimate by the version's bytes at that op and
// stay valid. Hence the default schedule's peak of a versioned graph equals
// that of the graph with `updates`, and no plan of it needs more memory
// than the same plan of its out-of-place rewrite (out_of_place()).
//
// Note [Replaying side effects]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Batch norm in training mode also updates its running statistics in
// place; its outputs do not depend on them. Recomputing it must not update
// them a second time, so a replay runs it against scratch statistics (what
// torch.utils.checkpoint users do with a frozen copy, and what the executor
// does). That makes such an op recomputable; an op that updates a gradient
// (accumulation) or anything during backward or the optimizer step is not.
//
// Note [Gathers replay with the forward]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Under ZeRO-3 (Note [ZeRO as a graph] in src/swap/zero.cc) each run of a
// parameter's forward users reads a whole copy of it that a collective (an
// op of phase comm) gathers from the rank's shard just before, and that
// dies after the run. An activation whose producer reads such a copy comes
// back in backward only if the copy does. It can: the shard is persistent,
// so replaying the all-gather re-creates the copy, as DeepSpeed's ZeRO-3
// fetches a module's parameters again when activation checkpointing re-runs
// its forward. Planners that replayed only ops of phase forward kept every
// activation such a copy feeds (every matmul's output in a transformer), so
// stage 3 lost most of the recomputation stage 2 plans with (issue 45). So
// a collective that updates nothing, reads only persistent buffers and
// whose outputs only forward ops read is a forward op for
// rematerialization: a replay re-gathers on the collective stream, and the
// copy lives only while the replayed readers run (Note [Applying
// evictions] in src/plan/builders.cc).
#include "memwall/graph/versions.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace memwall {
namespace {

bool versioned(const Graph& graph, const Op& op, BufferId b) {
  if (op.phase != Phase::kForward && op.phase != Phase::kBackward) return false;
  const BufferKind kind = graph.buffers[b].kind;
  return kind == BufferKind::kActivation || kind == BufferKind::kTemp;
}

}  // namespace

int version_in_place_updates(Graph& graph) {
  const size_t original = graph.buffers.size();
  std::vector<BufferId> current(original);  // original id -> its latest version
  std::vector<int> count(original, 0);
  for (size_t b = 0; b < original; ++b) current[b] = static_cast<BufferId>(b);
  const auto latest = [&](BufferId b) {
    return b >= 0 && static_cast<size_t>(b) < original ? current[b] : b;
  };
  int added = 0;
  for (Op& op : graph.ops) {
    for (BufferId& b : op.in) b = latest(b);
    BufferIds kept;
    for (const BufferId raw : op.updates) {
      const BufferId b = latest(raw);
      const bool known = raw >= 0 && static_cast<size_t>(raw) < original;
      if (!known || !versioned(graph, op, b)) {
        if (std::find(kept.begin(), kept.end(), b) == kept.end()) kept.push_back(b);
        continue;
      }
      if (std::find(op.out.begin(), op.out.end(), b) != op.out.end()) continue;  // listed twice
      Buffer next = graph.buffers[b];
      next.id = static_cast<BufferId>(graph.buffers.size());
      next.name = fmt::format("{}@v{}", graph.buffers[raw].name, ++count[raw]);
      next.version_of = b;
      // The storage dies as its last version; the others at the op that
      // takes them over (Note [Eager lifetimes]).
      if (graph.buffers[b].eager_free != kEagerUnknown) graph.buffers[b].eager_free = op.id;
      if (std::find(op.in.begin(), op.in.end(), b) == op.in.end()) op.in.push_back(b);
      op.out.push_back(next.id);
      // A version is made from the previous one, not by the kernel's
      // allocator (Note [Scratch before its output]).
      if (!op.scratch_first.empty()) op.scratch_first.push_back(0);
      current[raw] = next.id;
      graph.buffers.push_back(std::move(next));
      ++added;
    }
    op.updates = kept;
  }
  return added;
}

Graph out_of_place(Graph graph) {
  for (Buffer& b : graph.buffers) b.version_of = kNoBuffer;
  return graph;
}

bool recomputable(const Graph& graph, const Op& op) {
  if (op.updates.empty()) return true;
  if (op.phase != Phase::kForward) return false;
  return std::all_of(op.updates.begin(), op.updates.end(), [&](BufferId b) {
    return b >= 0 && static_cast<size_t>(b) < graph.buffers.size() &&
           is_persistent(graph.buffers[b].kind) &&
           std::find(op.in.begin(), op.in.end(), b) == op.in.end();
  });
}

std::vector<uint8_t> forward_side_ops(const Graph& graph) {
  std::vector<uint8_t> side(graph.ops.size(), 0);
  std::vector<OpId> gatherer(graph.buffers.size(), kNoOp);  // a candidate collective's outputs
  for (const Op& op : graph.ops) {
    side[op.id] = op.phase == Phase::kForward;
    if (op.phase != Phase::kComm || !op.updates.empty() || op.out.empty()) continue;
    const bool from_state = std::all_of(op.in.begin(), op.in.end(), [&](BufferId b) {
      return is_persistent(graph.buffers[b].kind);
    });
    if (!from_state) continue;
    for (const BufferId b : op.out) gatherer[b] = op.id;
  }
  std::vector<uint8_t> read(graph.ops.size(), 0), read_elsewhere(graph.ops.size(), 0);
  for (const Op& op : graph.ops) {
    const auto use = [&](BufferId b) {
      const OpId q = gatherer[b];
      if (q == kNoOp) return;
      (op.phase == Phase::kForward ? read : read_elsewhere)[q] = 1;
    };
    for (const BufferId b : op.in) use(b);
    for (const BufferId b : op.updates) use(b);
  }
  for (const Op& op : graph.ops) {
    if (op.phase == Phase::kComm) side[op.id] = read[op.id] && !read_elsewhere[op.id];
  }
  return side;
}

}  // namespace memwall
