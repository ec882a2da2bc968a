// memwall's one JSON string writer: every string memwall writes into JSON
// text by hand (graph and plan files, the Chrome trace) goes through here.
//
// Both functions append `text` in double quotes, copy every valid UTF-8
// sequence and DEL as they are, and escape '"' and '\' with a backslash and
// the other control characters (U+0000 to U+001F). They differ in those
// escapes and in what they do with bytes that are not UTF-8, which JSON
// text may not hold:
//
//   append_json_string        \u00xx (lowercase hex) for every control;
//                             bytes that are not UTF-8: returns false, and
//                             `out` then ends in part of the literal: the
//                             caller reports the error (memwall's own
//                             formats refuse such a name rather than change it).
//   append_json_string_lossy  what nlohmann::json's dump() writes with
//                             error_handler_t::replace: \b \f \n \r \t as
//                             two characters, the other controls as
//                             \u00xx, and each invalid sequence (its
//                             longest valid start, or one byte) as U+FFFD.
//                             For names from arbitrary files in a document
//                             nlohmann::json writes the rest of.
#pragma once

#include <string>
#include <string_view>

namespace memwall {

[[nodiscard]] bool append_json_string(std::string& out, std::string_view text);
void append_json_string_lossy(std::string& out, std::string_view text);

}  // namespace memwall
