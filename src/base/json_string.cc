// The one JSON string writer (json_string.h).
#include "memwall/base/json_string.h"

#include "memwall/base/quote.h"

namespace memwall {
namespace {

using namespace std::string_view_literals;

void append_hex_escape(std::string& out, unsigned char c) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\u00"sv;
  out += kHex[c >> 4];
  out += kHex[c & 15];
}

// The escape of '"', '\' or a control character c.
void append_escape(std::string& out, unsigned char c, bool short_forms) {
  if (c == '"' || c == '\\') {
    out += '\\';
    out += static_cast<char>(c);
    return;
  }
  if (short_forms) {
    switch (c) {
      case '\b':
        out += "\\b"sv;
        return;
      case '\f':
        out += "\\f"sv;
        return;
      case '\n':
        out += "\\n"sv;
        return;
      case '\r':
        out += "\\r"sv;
        return;
      case '\t':
        out += "\\t"sv;
        return;
      default:
        break;
    }
  }
  append_hex_escape(out, c);
}

// One pass: copies runs of plain bytes whole and escapes the rest. Lossy:
// each invalid UTF-8 sequence becomes U+FFFD; otherwise the first one stops
// the pass (false).
template <bool kLossy>
bool append_quoted(std::string& out, std::string_view text) {
  out += '"';
  size_t run = 0;  // start of the bytes not yet copied
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) continue;
    if (c >= 0x80) {
      const size_t length = detail::utf8_sequence_length(text, i);
      if (length != 0) {
        i += length - 1;
        continue;
      }
      if constexpr (!kLossy) return false;
      out.append(text.data() + run, i - run);
      out += "\xEF\xBF\xBD"sv;  // U+FFFD
      i += detail::utf8_maximal_subpart(text, i) - 1;
      run = i + 1;
      continue;
    }
    out.append(text.data() + run, i - run);
    run = i + 1;
    append_escape(out, c, kLossy);
  }
  out.append(text.data() + run, text.size() - run);
  out += '"';
  return true;
}

}  // namespace

bool append_json_string(std::string& out, std::string_view text) {
  return append_quoted<false>(out, text);
}

void append_json_string_lossy(std::string& out, std::string_view text) {
  (void)append_quoted<true>(out, text);
}

}  // namespace memwall
