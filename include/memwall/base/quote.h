// How error messages quote user text (shared by every reader).
//
// Every memwall error is one line (the command line prints it as-is), so any
// user-supplied text that goes into a message is escaped and shortened here.
// memwall/graph/describe.h names ops and buffers with it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace memwall::detail {

// Length of the valid UTF-8 sequence starting at s[i], or 0 if it is invalid
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
size_t utf8_sequence_length(std::string_view s, size_t i);
// Where s[i] does not start a valid sequence: how many bytes one U+FFFD
// stands for, the longest start of a valid sequence there or else the one
// byte (Unicode's "maximal subpart" practice, which nlohmann::json follows).
size_t utf8_maximal_subpart(std::string_view s, size_t i);

// `text` in double quotes, JSON-escaped (invalid UTF-8 bytes as \xNN) and cut
// to about 60 characters at a character boundary.
std::string in_quotes(std::string_view text);

}  // namespace memwall::detail
