// Strict JSON reading for graph text (see json_cursor.h).
#include "memwall/base/json_cursor.h"

#include <charconv>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/base/quote.h"

namespace memwall::detail {
namespace {

// Printable form of the character at an error position.
std::string describe_char(std::string_view text, size_t pos) {
  if (pos >= text.size()) return "the end of input";
  const auto c = static_cast<unsigned char>(text[pos]);
  if (c >= 0x20 && c < 0x7F) return fmt::format("'{}'", static_cast<char>(c));
  return fmt::format("byte 0x{:02X}", c);
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// True when |number| >= 1, from its digits alone. from_chars only says "out of
// range"; this tells overflow (>= 1) from underflow (< 1) apart.
bool at_least_one(std::string_view text) {
  size_t i = text[0] == '-' ? 1 : 0;
  int64_t exponent = 0;  // decimal exponent of the first significant digit, +1
  if (text[i] != '0') {
    while (i < text.size() && is_digit(text[i])) {
      ++exponent;
      ++i;
    }
    if (i < text.size() && text[i] == '.') ++i;
    while (i < text.size() && is_digit(text[i])) ++i;
  } else {
    ++i;
    if (i < text.size() && text[i] == '.') ++i;
    while (i < text.size() && text[i] == '0') {
      --exponent;
      ++i;
    }
    while (i < text.size() && is_digit(text[i])) ++i;
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    const bool negative = text[i] == '-';
    if (text[i] == '-' || text[i] == '+') ++i;
    int64_t value = 0;
    for (; i < text.size(); ++i) {
      value = std::min<int64_t>(value * 10 + (text[i] - '0'), 1'000'000'000);
    }
    exponent += negative ? -value : value;
  }
  return exponent > 0;
}

// Clinger's fast path: when the decimal significand fits in 53 bits and the
// power of ten is at most 10^22, both are exact doubles and one IEEE multiply
// or divide rounds correctly. Covers numbers like 1.5e+09 or 0.25 without
// from_chars. `text` is a valid JSON number.
std::optional<double> exact_decimal(std::string_view text) {
  static constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                      1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                      1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  size_t i = 0;
  const bool negative = text[0] == '-';
  if (negative) ++i;
  uint64_t significand = 0;
  int digits = 0;
  int exponent = 0;
  for (; i < text.size() && is_digit(text[i]); ++i, ++digits) {
    significand = significand * 10 + static_cast<uint64_t>(text[i] - '0');
  }
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && is_digit(text[i]); ++i, ++digits, --exponent) {
      significand = significand * 10 + static_cast<uint64_t>(text[i] - '0');
    }
  }
  if (digits > 19) return std::nullopt;  // the significand may have wrapped
  if (i < text.size()) {                 // 'e' or 'E'
    ++i;
    const bool negative_exponent = text[i] == '-';
    if (text[i] == '-' || text[i] == '+') ++i;
    int value = 0;
    for (; i < text.size(); ++i) {
      if (value > 1000) return std::nullopt;
      value = value * 10 + (text[i] - '0');
    }
    exponent += negative_exponent ? -value : value;
  }
  if (significand > (uint64_t{1} << 53) || exponent < -22 || exponent > 22) return std::nullopt;
  double value = static_cast<double>(significand);
  value = exponent < 0 ? value / kPow10[-exponent] : value * kPow10[exponent];
  return negative ? -value : value;
}

}  // namespace

std::string_view type_name(JsonType type) {
  switch (type) {
    case JsonType::kObject:
      return "an object";
    case JsonType::kArray:
      return "an array";
    case JsonType::kString:
      return "a string";
    case JsonType::kNumber:
      return "a number";
    case JsonType::kBool:
      return "a boolean";
    case JsonType::kNull:
      return "null";
    case JsonType::kInvalid:
      break;
  }
  return "invalid JSON";
}

std::optional<double> to_double(const JsonNumber& number) {
  if (number.integer && number.fits_u64) {
    // Converting an exact integer rounds correctly, like parsing its digits.
    const auto value = static_cast<double>(number.magnitude);
    return number.negative ? -value : value;
  }
  if (const std::optional<double> exact = exact_decimal(number.text)) return exact;
  double value = 0;
  const char* first = number.text.data();
  const char* last = first + number.text.size();
  const auto result = std::from_chars(first, last, value);
  if (result.ec == std::errc::result_out_of_range) {
    if (at_least_one(number.text)) return std::nullopt;
    return number.negative ? -0.0 : 0.0;
  }
  if (result.ec != std::errc() || result.ptr != last || !std::isfinite(value)) return std::nullopt;
  return value;
}

JsonCursor::JsonCursor(std::string_view text, const char* format) : text_(text), format_(format) {
  // A UTF-8 byte order mark is not JSON, but editors write it.
  if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;
}

void JsonCursor::error(std::string_view what) const {
  size_t line = 1;
  size_t line_start = 0;
  const size_t end = std::min(pos_, text_.size());
  for (size_t i = 0; i < end; ++i) {
    if (text_[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  std::string where;
  if (context_kind_) {
    where = context_index_ == kNoIndex ? fmt::format(" (in {})", context_kind_)
                                       : fmt::format(" (in {} {})", context_kind_, context_index_);
  }
  fail("{}: invalid JSON at line {}, column {}{}: {}", format_, line, end - line_start + 1, where,
       what);
}

void JsonCursor::expected(char c) const {
  error(fmt::format("expected '{}', got {}", c, describe_char(text_, pos_)));
}

void JsonCursor::expect_end() {
  if (peek() != '\0' || pos_ < text_.size()) {
    error(fmt::format("unexpected {} after the top-level object", describe_char(text_, pos_)));
  }
}

std::string_view JsonCursor::parse_string_slow(size_t start, size_t stop) {
  scratch_.assign(text_.data() + start, stop - start);
  pos_ = stop;
  for (;;) {
    if (pos_ >= text_.size()) error("unterminated string");
    const auto c = static_cast<unsigned char>(text_[pos_]);
    if (c == '"') {
      ++pos_;
      return scratch_;
    }
    if (c < 0x20) error("control character in a string (it must be escaped)");
    if (c >= 0x80) {
      const size_t length = utf8_sequence_length(text_, pos_);
      if (length == 0) error("invalid UTF-8 in a string");
      scratch_.append(text_.data() + pos_, length);
      pos_ += length;
      continue;
    }
    if (c != '\\') {
      scratch_ += static_cast<char>(c);
      ++pos_;
      continue;
    }
    ++pos_;
    const char escape = pos_ < text_.size() ? text_[pos_] : '\0';
    ++pos_;
    switch (escape) {
      case '"':
        scratch_ += '"';
        break;
      case '\\':
        scratch_ += '\\';
        break;
      case '/':
        scratch_ += '/';
        break;
      case 'b':
        scratch_ += '\b';
        break;
      case 'f':
        scratch_ += '\f';
        break;
      case 'n':
        scratch_ += '\n';
        break;
      case 'r':
        scratch_ += '\r';
        break;
      case 't':
        scratch_ += '\t';
        break;
      case 'u': {
        uint32_t cp = parse_hex4();
        if (cp >= 0xDC00 && cp <= 0xDFFF) error("unpaired UTF-16 surrogate in a \\u escape");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          if (text_.substr(pos_, 2) != "\\u") error("unpaired UTF-16 surrogate in a \\u escape");
          pos_ += 2;
          const uint32_t low = parse_hex4();
          if (low < 0xDC00 || low > 0xDFFF) error("unpaired UTF-16 surrogate in a \\u escape");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        append_utf8(scratch_, cp);
        break;
      }
      default:
        pos_ -= 2;
        error("invalid escape in a string");
    }
  }
}

uint32_t JsonCursor::parse_hex4() {
  uint32_t value = 0;
  for (int k = 0; k < 4; ++k, ++pos_) {
    const char c = pos_ < text_.size() ? text_[pos_] : '\0';
    uint32_t digit = 0;
    if (is_digit(c)) {
      digit = static_cast<uint32_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      digit = static_cast<uint32_t>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      digit = static_cast<uint32_t>(c - 'A' + 10);
    } else {
      error("expected four hex digits after \\u");
    }
    value = value * 16 + digit;
  }
  return value;
}

JsonNumber JsonCursor::parse_number_slow() {
  JsonNumber number;
  const size_t start = pos_;
  const size_t size = text_.size();
  const char* data = text_.data();
  if (pos_ < size && data[pos_] == '-') {
    number.negative = true;
    ++pos_;
  }
  if (pos_ >= size || !is_digit(data[pos_])) error("invalid number");
  if (data[pos_] == '0') {
    ++pos_;  // JSON forbids leading zeros: "01" ends the number after "0"
  } else {
    constexpr uint64_t kLimit = std::numeric_limits<uint64_t>::max();
    for (; pos_ < size && is_digit(data[pos_]); ++pos_) {
      const auto digit = static_cast<uint64_t>(data[pos_] - '0');
      if (number.magnitude > (kLimit - digit) / 10) number.fits_u64 = false;
      number.magnitude = number.magnitude * 10 + digit;
    }
  }
  if (pos_ < size && data[pos_] == '.') {
    number.integer = false;
    ++pos_;
    if (pos_ >= size || !is_digit(data[pos_])) error("invalid number (a digit must follow '.')");
    while (pos_ < size && is_digit(data[pos_])) ++pos_;
  }
  if (pos_ < size && (data[pos_] == 'e' || data[pos_] == 'E')) {
    number.integer = false;
    ++pos_;
    if (pos_ < size && (data[pos_] == '+' || data[pos_] == '-')) ++pos_;
    if (pos_ >= size || !is_digit(data[pos_])) error("invalid number (a digit must follow 'e')");
    while (pos_ < size && is_digit(data[pos_])) ++pos_;
  }
  number.text = text_.substr(start, pos_ - start);
  return number;
}

void JsonCursor::expect_literal(std::string_view literal) {
  if (text_.substr(pos_, literal.size()) != literal) {
    error("invalid literal (expected true, false or null)");
  }
  pos_ += literal.size();
}

void JsonCursor::parse_null() {
  skip_whitespace();
  expect_literal("null");
}

std::string_view JsonCursor::skip_value(int depth) {
  if (depth > kMaxDepth) error(fmt::format("nesting deeper than {} levels", kMaxDepth));
  const char c = peek();
  const size_t start = pos_;
  switch (peek_type()) {
    case JsonType::kObject:
      for_each_member([&](std::string_view) { skip_value(depth + 1); });
      break;
    case JsonType::kArray:
      for_each_element([&](size_t) { skip_value(depth + 1); });
      break;
    case JsonType::kString:
      parse_string();
      break;
    case JsonType::kNumber:
      if (!to_double(parse_number())) {
        pos_ = start;
        error("number too large for a double");
      }
      break;
    case JsonType::kBool:
      expect_literal(c == 't' ? "true" : "false");
      break;
    case JsonType::kNull:
      expect_literal("null");
      break;
    case JsonType::kInvalid:
      error(pos_ < text_.size()
                ? fmt::format("expected a value, got {}", describe_char(text_, pos_))
                : std::string("unexpected end of input"));
  }
  return text_.substr(start, pos_ - start);
}

}  // namespace memwall::detail
