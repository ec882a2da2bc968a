// Naming ops and buffers in one-line error messages (see describe.h).
#include "memwall/graph/describe.h"

#include <fmt/format.h>

namespace memwall::detail {

std::string op_label(const Graph& graph, OpId op) {
  return fmt::format("op {} ({})", op, in_quotes(graph.ops[op].name));
}

std::string buffer_label(const Graph& graph, BufferId buffer) {
  return fmt::format("buffer {} ({})", buffer, in_quotes(graph.buffers[buffer].name));
}

}  // namespace memwall::detail
