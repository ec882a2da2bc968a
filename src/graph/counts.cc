#include "memwall/graph/counts.h"

#include "memwall/graph/error.h"

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

}  // namespace memwall
