#include "memwall/graph/counts.h"

#include <vector>

#include "memwall/base/error.h"

namespace memwall {

uint64_t element_count(const Buffer& buffer) {
  if (buffer.shape.empty()) return buffer.bytes / dtype_size(buffer.dtype);
  uint64_t n = 1;
  for (int64_t d : buffer.shape) n = checked_mul(n, static_cast<uint64_t>(d), "element count");
  return n;
}

uint64_t param_count(const Graph& graph) {
  uint64_t n = 0;
  for (const Buffer& b : graph.buffers) {
    if (b.kind == BufferKind::kParam) n = checked_add(n, element_count(b), "parameter count");
  }
  return n;
}

uint64_t model_param_count(const Graph& graph) {
  const auto it = graph.meta.find("param_count");
  if (it != graph.meta.end() && it->is_number_integer() && it->get<int64_t>() >= 0) {
    return it->get<uint64_t>();
  }
  return param_count(graph);
}

uint64_t trainable_param_count(const Graph& graph) {
  std::vector<char> trains(graph.buffers.size(), 0);
  for (const Op& op : graph.ops) {
    if (op.phase != Phase::kOptimizer) continue;
    for (BufferId b : op.updates) trains[b] = 1;
  }
  uint64_t n = 0;
  for (const Buffer& b : graph.buffers) {
    if (b.kind == BufferKind::kParam && trains[b.id]) {
      n = checked_add(n, element_count(b), "trainable parameter count");
    }
  }
  return n;
}

}  // namespace memwall
