// How error messages name ops and buffers (shared by every reader).
//
// Names are quoted as memwall/base/quote.h quotes any user text: escaped
// and shortened, so that every message stays one line.
#pragma once

#include <string>

#include "memwall/base/quote.h"
#include "memwall/graph/types.h"

namespace memwall::detail {

// `op 7 ("h0.mlp.fc1")` and `buffer 12 ("h0.attn.q")`; the id must be in range.
std::string op_label(const Graph& graph, OpId op);
std::string buffer_label(const Graph& graph, BufferId buffer);

}  // namespace memwall::detail
