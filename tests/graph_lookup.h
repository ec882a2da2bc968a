// Buffers and ops of a graph by name, for tests (tests/ is on every test
// executable's include path).
#pragma once

#include <string_view>

#include "memwall/graph/graph.h"

namespace memwall {

inline const Buffer* find_buffer(const Graph& g, std::string_view name) {
  for (const Buffer& b : g.buffers)
    if (b.name == name) return &b;
  return nullptr;
}

inline const Op* find_op(const Graph& g, std::string_view name) {
  for (const Op& op : g.ops)
    if (op.name == name) return &op;
  return nullptr;
}

}  // namespace memwall
