// How error messages name strings, ops and buffers (shared by every reader).
//
// Every memwall error is one line (the command line prints it as-is), so any
// user-supplied text that goes into a message is escaped and shortened here.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "memwall/graph/types.h"

namespace memwall::detail {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if it is invalid
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
size_t utf8_sequence_length(std::string_view s, size_t i);
bool is_valid_utf8(std::string_view s);

// `text` in double quotes, JSON-escaped (invalid UTF-8 bytes as \xNN) and cut
// to about 60 characters at a character boundary.
std::string in_quotes(std::string_view text);

// `op 7 ("h0.mlp.fc1")` and `buffer 12 ("h0.attn.q")`; the id must be in range.
std::string op_label(const Graph& graph, OpId op);
std::string buffer_label(const Graph& graph, BufferId buffer);

}  // namespace memwall::detail
