// The layout problem of a graph's default schedule (from_graph.h).
#include "memwall/layout/from_graph.h"

#include <algorithm>

#include "memwall/graph/graph.h"

namespace memwall {

LayoutProblem layout_problem(const Graph& graph) {
  const std::vector<BufferLife> lives = liveness(graph);
  // Op i runs during [i, i + 1); with no ops, one instant holds everything.
  const auto end = static_cast<int64_t>(std::max<size_t>(graph.ops.size(), 1));
  LayoutProblem problem;
  for (size_t b = 0; b < lives.size(); ++b) {
    const Buffer& buffer = graph.buffers[b];
    if (buffer.bytes == 0) continue;
    const BufferLife& life = lives[b];
    problem.buffers.push_back(LayoutBuffer{
        .id = buffer.id,
        .lower = life.alloc_op == kNoOp ? 0 : life.alloc_op,
        .upper = life.free_op == kNoOp ? end : int64_t{life.free_op} + 1,
        .size = buffer.bytes,
    });
  }
  return problem;
}

}  // namespace memwall
