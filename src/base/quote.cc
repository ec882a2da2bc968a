// Escaping for one-line error messages (see quote.h).
#include "memwall/base/quote.h"

#include <fmt/format.h>

namespace memwall::detail {
namespace {

constexpr size_t kMaxQuoted = 60;

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

}  // namespace

size_t utf8_sequence_length(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = at(0);
  if (c < 0x80) return 1;
  size_t length = 0;
  // Second-byte bounds exclude overlong encodings, UTF-16 surrogates
  // (U+D800..U+DFFF) and code points above U+10FFFF.
  unsigned char low = 0x80;
  unsigned char high = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    length = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    length = 3;
    if (c == 0xE0) low = 0xA0;
    if (c == 0xED) high = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    length = 4;
    if (c == 0xF0) low = 0x90;
    if (c == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (s.size() - i < length) return 0;
  if (at(1) < low || at(1) > high) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (!is_continuation(at(k))) return 0;
  }
  return length;
}

std::string in_quotes(std::string_view text) {
  std::string out = "\"";
  size_t shown = 0;
  for (size_t i = 0; i < text.size();) {
    if (shown == kMaxQuoted) {
      out += "...";
      break;
    }
    ++shown;
    const auto c = static_cast<unsigned char>(text[i]);
    const size_t length = utf8_sequence_length(text, i);
    if (length == 0) {
      out += fmt::format("\\x{:02X}", c);
      ++i;
      continue;
    }
    if (length > 1) {
      out.append(text.substr(i, length));
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\u{:04X}", c);
    } else {
      out += static_cast<char>(c);
    }
    i += length;
  }
  out += '"';
  return out;
}

}  // namespace memwall::detail
