// Default-schedule liveness (graph.h, DESIGN.md "Graph").
//
// One pass over every op's in/out/updates lists records producer, first and
// last use, and whether an optimizer op touches a grad; a pass over buffers
// then turns those into alloc/free ops. O(ops + edges).
#include <algorithm>
#include <vector>

#include "memwall/graph/describe.h"
#include "memwall/graph/graph.h"

namespace memwall {
namespace {

// Liveness indexes by id; an id out of range must not become a wild write
// even when the graph was never validated.
void check_id(const Graph& graph, const Op& op, BufferId b) {
  if (b < 0 || static_cast<size_t>(b) >= graph.buffers.size()) {
    fail("graph: {} uses buffer {}, which does not exist", detail::op_label(graph, op.id), b);
  }
}

}  // namespace

std::vector<BufferLife> liveness(const Graph& graph) {
  std::vector<BufferLife> lives(graph.buffers.size());
  std::vector<bool> kept_for_optimizer(graph.buffers.size(), false);
  const auto n_ops = static_cast<OpId>(graph.ops.size());
  for (OpId i = 0; i < n_ops; ++i) {
    const Op& op = graph.ops[i];
    for (const BufferId b : op.out) {
      check_id(graph, op, b);
      lives[b].producer = i;
    }
    const auto use = [&](BufferId b) {
      check_id(graph, op, b);
      BufferLife& life = lives[b];
      if (life.first_use == kNoOp) life.first_use = i;
      life.last_use = i;
      if (op.phase == Phase::kOptimizer && graph.buffers[b].kind == BufferKind::kGrad) {
        kept_for_optimizer[b] = true;
      }
    };
    for (const BufferId b : op.in) use(b);
    for (const BufferId b : op.updates) use(b);
  }
  for (size_t b = 0; b < lives.size(); ++b) {
    BufferLife& life = lives[b];
    const BufferKind kind = graph.buffers[b].kind;
    if (exists_before_first_op(kind) || life.producer == kNoOp) {
      // Exists from the start. An input dies after its last use; one that no
      // op uses dies after op 0 (see graph.h).
      life.alloc_op = kNoOp;
      if (is_persistent(kind) || n_ops == 0) {
        life.free_op = kNoOp;
      } else {
        life.free_op = life.last_use == kNoOp ? 0 : life.last_use;
      }
      continue;
    }
    life.alloc_op = life.producer;
    if (kept_for_optimizer[b]) {
      life.free_op = kNoOp;  // a gradient the optimizer reads lives to the end
    } else {
      life.free_op = std::max(life.producer, life.last_use);
    }
  }
  return lives;
}

bool has_eager_lifetimes(const Graph& graph) {
  return std::any_of(graph.buffers.begin(), graph.buffers.end(),
                     [](const Buffer& b) { return b.eager_free != kEagerUnknown; });
}

std::vector<BufferLife> eager_liveness(const Graph& graph) {
  std::vector<BufferLife> lives = liveness(graph);
  for (const Buffer& b : graph.buffers) {
    BufferLife& life = lives[b.id];
    if (b.eager_free == kEagerUnknown || is_persistent(b.kind)) continue;
    if (b.eager_free == kNoOp) {
      life.free_op = kNoOp;
    } else if (life.free_op != kNoOp) {
      life.free_op = std::max({life.free_op, b.eager_free, life.alloc_op});
    }
  }
  return lives;
}

}  // namespace memwall
