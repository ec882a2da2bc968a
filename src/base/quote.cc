// Escaping for one-line error messages (see quote.h).
#include "memwall/base/quote.h"

#include <fmt/format.h>

namespace memwall::detail {
namespace {

constexpr size_t kMaxQuoted = 60;

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// How far the bytes at s[i] follow the one valid UTF-8 form their first byte
// starts: `length` is that form's length (0 when the byte starts none),
// `valid` how many of its bytes are there and right (at least 1).
struct Utf8Prefix {
  size_t length = 0;
  size_t valid = 1;
};

Utf8Prefix utf8_prefix(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = at(0);
  Utf8Prefix p;
  if (c < 0x80) {
    p.length = 1;
    return p;
  }
  // Second-byte bounds exclude overlong encodings, UTF-16 surrogates
  // (U+D800..U+DFFF) and code points above U+10FFFF.
  unsigned char low = 0x80;
  unsigned char high = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    p.length = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    p.length = 3;
    if (c == 0xE0) low = 0xA0;
    if (c == 0xED) high = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    p.length = 4;
    if (c == 0xF0) low = 0x90;
    if (c == 0xF4) high = 0x8F;
  } else {
    return p;
  }
  const size_t left = s.size() - i;
  if (left < 2 || at(1) < low || at(1) > high) return p;
  p.valid = 2;
  while (p.valid < p.length && p.valid < left && is_continuation(at(p.valid))) ++p.valid;
  return p;
}

}  // namespace

size_t utf8_sequence_length(std::string_view s, size_t i) {
  const Utf8Prefix p = utf8_prefix(s, i);
  return p.valid == p.length ? p.length : 0;
}

size_t utf8_maximal_subpart(std::string_view s, size_t i) { return utf8_prefix(s, i).valid; }

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
