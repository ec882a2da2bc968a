// Memory accounting of the default schedule (graph.h).
//
// memory_profile buckets every buffer's size at its alloc and free op, then
// sweeps the ops once: O(ops + buffers). Sums use checked_add so that a graph
// built in memory and never validated still cannot overflow silently.
#include <algorithm>
#include <vector>

#include "memwall/graph/describe.h"
#include "memwall/graph/graph.h"

namespace memwall {
namespace {

constexpr const char* kInUse = "graph: bytes in use during an op";

size_t kind_index(const Graph& graph, size_t b) {
  const auto kind = static_cast<size_t>(graph.buffers[b].kind);
  if (kind >= kNumBufferKinds) {
    fail("graph: {} has an invalid kind", detail::buffer_label(graph, static_cast<BufferId>(b)));
  }
  return kind;
}

void check_life(const Graph& graph, size_t b, const BufferLife& life) {
  const auto n = static_cast<OpId>(graph.ops.size());
  const bool ok =
      life.alloc_op >= kNoOp && life.alloc_op < n && life.free_op >= kNoOp && life.free_op < n &&
      (life.alloc_op == kNoOp || life.free_op == kNoOp || life.free_op >= life.alloc_op);
  if (!ok) {
    fail("graph: {}: inconsistent lifetime (alloc op {}, free op {})",
         detail::buffer_label(graph, static_cast<BufferId>(b)), life.alloc_op, life.free_op);
  }
}

bool live_during(const BufferLife& life, OpId op) {
  return (life.alloc_op == kNoOp || life.alloc_op <= op) &&
         (life.free_op == kNoOp || life.free_op >= op);
}

void check_buffer_id(const Graph& graph, const Op& op, BufferId b) {
  if (b < 0 || static_cast<size_t>(b) >= graph.buffers.size()) {
    fail("graph: {} uses buffer {}, which does not exist", detail::op_label(graph, op.id), b);
  }
}

// A next version takes over its previous version's storage when that
// version is freed right after the op that creates this one: the op ran in
// place (Note [Buffer versions] in versions.cc).
bool takes_over_storage(const Graph& graph, const std::vector<BufferLife>& lives, size_t b) {
  const BufferId prev = graph.buffers[b].version_of;
  if (prev < 0 || static_cast<size_t>(prev) >= lives.size()) return false;
  const OpId at = lives[b].alloc_op;
  return at != kNoOp && lives[prev].free_op == at &&
         graph.buffers[prev].bytes == graph.buffers[b].bytes;
}

}  // namespace

MemoryProfile memory_profile(const Graph& graph) { return memory_profile(graph, liveness(graph)); }

MemoryProfile memory_profile(const Graph& graph, const std::vector<BufferLife>& lives) {
  if (lives.size() != graph.buffers.size()) {
    fail("graph: {} lifetimes given for {} buffers", lives.size(), graph.buffers.size());
  }
  const size_t n = graph.ops.size();
  MemoryProfile profile;
  std::vector<uint64_t> allocated(n, 0);             // bytes allocated at op i
  std::vector<uint64_t> freed(n, 0);                 // bytes released right after op i
  std::vector<uint8_t> shares(lives.size(), 0);      // takes over its predecessor's storage
  std::vector<uint8_t> taken_over(lives.size(), 0);  // storage passed on to the next version
  for (size_t b = 0; b < lives.size(); ++b) check_life(graph, b, lives[b]);
  for (size_t b = 0; b < lives.size(); ++b) {
    shares[b] = takes_over_storage(graph, lives, b);
    if (shares[b]) taken_over[graph.buffers[b].version_of] = 1;
  }
  for (size_t b = 0; b < lives.size(); ++b) {
    const BufferLife& life = lives[b];
    const uint64_t bytes = graph.buffers[b].bytes;
    if (!shares[b]) {
      uint64_t& at_alloc =
          life.alloc_op == kNoOp ? profile.initial_bytes : allocated[life.alloc_op];
      at_alloc = checked_add(at_alloc, bytes, kInUse);
    }
    if (life.free_op != kNoOp && !taken_over[b])
      freed[life.free_op] = checked_add(freed[life.free_op], bytes, kInUse);
  }

  profile.curve.resize(n);
  profile.peak_bytes = profile.initial_bytes;
  uint64_t live = profile.initial_bytes;  // bytes live before op i
  for (size_t i = 0; i < n; ++i) {
    const uint64_t buffers = checked_add(live, allocated[i], kInUse);
    // Buffers alone are bounded by validate's total; their op's workspace is
    // what can push the sum over, so the message names the op.
    const uint64_t workspace = graph.ops[i].workspace;
    if (buffers > kMaxBytes || workspace > kMaxBytes - buffers) {
      fail(
          "graph: {}: {} bytes of live buffers and {} of workspace exceed the limit of 2^62 "
          "bytes in use",
          detail::op_label(graph, static_cast<OpId>(i)), buffers, workspace);
    }
    const uint64_t during = buffers + workspace;
    profile.curve[i] = during;
    if (profile.peak_op == kNoOp || during > profile.peak_bytes) {
      profile.peak_bytes = during;
      profile.peak_op = static_cast<OpId>(i);
    }
    // Every buffer freed here was counted in `live` or `allocated` (free_op
    // >= alloc_op), so this cannot underflow.
    live = buffers - freed[i];
  }

  // Breakdown at the peak; with no ops, of the buffers that exist at the start.
  for (size_t b = 0; b < lives.size(); ++b) {
    const bool shared_here = shares[b] && lives[b].alloc_op == profile.peak_op;
    const bool counted = profile.peak_op == kNoOp
                             ? lives[b].alloc_op == kNoOp
                             : live_during(lives[b], profile.peak_op) && !shared_here;
    if (counted) {
      uint64_t& slot = profile.peak_by_kind[kind_index(graph, b)];
      slot = checked_add(slot, graph.buffers[b].bytes, kInUse);
    }
  }
  if (profile.peak_op != kNoOp) {
    uint64_t& slot = profile.peak_by_kind[static_cast<size_t>(BufferKind::kWorkspace)];
    slot = checked_add(slot, graph.ops[profile.peak_op].workspace, kInUse);
  }
  return profile;
}

std::vector<uint8_t> saved_for_backward(const Graph& graph) {
  // Two passes so that the result does not depend on op order being valid.
  std::vector<uint8_t> saved(graph.buffers.size(), 0);
  std::vector<uint8_t> forward_activation(graph.buffers.size(), 0);
  for (const Op& op : graph.ops) {
    if (op.phase != Phase::kForward) continue;
    for (const BufferId b : op.out) {
      check_buffer_id(graph, op, b);
      if (graph.buffers[b].kind == BufferKind::kActivation) forward_activation[b] = 1;
    }
  }
  // A collective in backward reads for it too: sequence parallelism
  // gathers a saved shard again there (Note [Tensor parallelism in the
  // zoo] in src/models/tensor_parallel.cc).
  const auto first_backward = std::find_if(graph.ops.begin(), graph.ops.end(), [](const Op& op) {
    return op.phase == Phase::kBackward;
  });
  for (const Op& op : graph.ops) {
    const bool in_backward = op.phase == Phase::kBackward ||
                             (op.phase == Phase::kComm && first_backward != graph.ops.end() &&
                              op.id > first_backward->id);
    if (!in_backward) continue;
    const auto use = [&](BufferId b) {
      check_buffer_id(graph, op, b);
      saved[b] = saved[b] | forward_activation[b];
    };
    for (const BufferId b : op.in) use(b);
    for (const BufferId b : op.updates) use(b);
  }
  return saved;
}

bool has_backward(const Graph& graph) {
  return std::any_of(graph.ops.begin(), graph.ops.end(),
                     [](const Op& op) { return op.phase == Phase::kBackward; });
}

std::vector<uint8_t> read_again_later(const Graph& graph) {
  if (has_backward(graph)) return saved_for_backward(graph);
  // last[b]: the latest op that created or used b so far.
  std::vector<uint8_t> later(graph.buffers.size(), 0);
  std::vector<OpId> last(graph.buffers.size(), kNoOp);
  for (const Op& op : graph.ops) {
    const auto use = [&](BufferId b) {
      check_buffer_id(graph, op, b);
      const bool gap = last[b] != kNoOp && op.id - last[b] >= 2;
      if (gap && graph.buffers[b].kind == BufferKind::kActivation) later[b] = 1;
      last[b] = op.id;
    };
    for (const BufferId b : op.in) use(b);
    for (const BufferId b : op.updates) use(b);
    for (const BufferId b : op.out) {
      check_buffer_id(graph, op, b);
      last[b] = op.id;
    }
  }
  return later;
}

uint64_t saved_activation_bytes(const Graph& graph, std::string_view prefix) {
  const std::vector<uint8_t> saved = saved_for_backward(graph);
  uint64_t total = 0;
  for (const Buffer& buffer : graph.buffers) {
    if (saved[buffer.id] && buffer.name.starts_with(prefix)) {
      total = checked_add(total, buffer.bytes, "graph: saved activation bytes");
    }
  }
  return total;
}

MemorySummary memory_summary(const Graph& graph) {
  MemorySummary summary;
  for (size_t b = 0; b < graph.buffers.size(); ++b) {
    // A version is its predecessor's storage, updated in place (Note
    // [Buffer versions]): counted once, as the program allocates it.
    if (graph.buffers[b].version_of != kNoBuffer) continue;
    uint64_t& slot = summary.bytes_by_kind[kind_index(graph, b)];
    slot = checked_add(slot, graph.buffers[b].bytes, "graph: total bytes of one kind");
  }
  for (const Op& op : graph.ops) {
    summary.peak_workspace_bytes = std::max(summary.peak_workspace_bytes, op.workspace);
  }
  summary.saved_activation_bytes = saved_activation_bytes(graph, "");
  return summary;
}

}  // namespace memwall
