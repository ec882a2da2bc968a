// A strict, fast JSON reader for memwall's own formats (graph, plan), shared
// by their readers; not a general-purpose API.
//
// Why not nlohmann::json::parse: a 1M-op graph is a few hundred MB of JSON,
// and building a DOM of it takes seconds and gigabytes. The cursor walks the
// text once, lets the caller convert each value straight into the Graph, and
// checks everything RFC 8259 requires (number grammar, escapes, UTF-8,
// nesting), so that what it accepts nlohmann accepts too (meta is handed to
// nlohmann as a validated span).
//
// Syntax errors throw memwall::Error naming the format, line, column and the
// object being read ("graph: invalid JSON at line 3, column 14 (in op 7): ...").
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "memwall/base/digits.h"

namespace memwall::detail {

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }

enum class JsonType : uint8_t { kObject, kArray, kString, kNumber, kBool, kNull, kInvalid };
std::string_view type_name(JsonType type);

// A number token. `integer`: no fraction and no exponent; then `magnitude`
// holds |value| when `fits_u64`.
struct JsonNumber {
  std::string_view text;
  bool negative = false;
  bool integer = true;
  bool fits_u64 = true;
  uint64_t magnitude = 0;
};

// The value as a double; std::nullopt when it is too large for a double
// (numbers too small for one round to zero, as strtod does).
std::optional<double> to_double(const JsonNumber& number);

class JsonCursor {
 public:
  // Deepest nesting skip_value accepts (it recurses).
  static constexpr int kMaxDepth = 256;

  // `format` starts syntax error messages ("graph", "plan").
  explicit JsonCursor(std::string_view text, const char* format = "graph");

  static constexpr size_t kNoIndex = static_cast<size_t>(-1);

  // Names the object being read in syntax errors, e.g. ("op", 7) or
  // ("\"meta\"", kNoIndex); nullptr: none.
  void set_context(const char* kind, size_t index) {
    context_kind_ = kind;
    context_index_ = index;
  }

  // Next non-whitespace character, '\0' at the end of input.
  char peek() {
    skip_whitespace();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  JsonType peek_type() {
    const char c = peek();
    switch (c) {
      case '{':
        return JsonType::kObject;
      case '[':
        return JsonType::kArray;
      case '"':
        return JsonType::kString;
      case 't':
      case 'f':
        return JsonType::kBool;
      case 'n':
        return JsonType::kNull;
      default:
        return c == '-' || is_digit(c) ? JsonType::kNumber : JsonType::kInvalid;
    }
  }
  // Cheaper than peek_type() on hot paths.
  bool at_number() {
    const char c = peek();
    return c == '-' || is_digit(c);
  }
  bool at_string() { return peek() == '"'; }
  bool consume(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void expect(char c) {
    if (peek() != c) expected(c);
    ++pos_;
  }
  // The end of input, after optional whitespace.
  void expect_end();

  // The decoded string; valid until the next parse_string or skip_value.
  std::string_view parse_string() {
    expect('"');
    const size_t start = pos_;
    // Fast path: plain ASCII without escapes is a view of the text.
    const size_t stop = find_special(start);
    if (stop < text_.size() && text_[stop] == '"') {
      pos_ = stop + 1;
      return text_.substr(start, stop - start);
    }
    return parse_string_slow(start, stop);
  }

  // Canonical-layout primitives (Note [Canonical fast path] in src/graph/json_objects.cc):
  // each reads a value right here (no whitespace skipped) only in its
  // plainest form, with the value the general parse gives; anything else
  // returns std::nullopt and leaves the cursor where it was.

  // A string without escapes, control characters or non-ASCII bytes.
  std::optional<std::string_view> try_plain_string() {
    if (pos_ >= text_.size() || text_[pos_] != '"') return std::nullopt;
    const size_t stop = find_special(pos_ + 1);
    if (stop >= text_.size() || text_[stop] != '"') return std::nullopt;
    const std::string_view value = text_.substr(pos_ + 1, stop - pos_ - 1);
    pos_ = stop + 1;
    return value;
  }
  // A non-negative integer of at most 15 digits, not followed by a fraction
  // or an exponent.
  std::optional<uint64_t> try_small_uint() {
    if constexpr (std::endian::native != std::endian::little) return std::nullopt;
    const char* data = text_.data();
    const size_t i = pos_;
    if (text_.size() - i < 16) return std::nullopt;
    unsigned n = 0;
    uint64_t value = 0;
    if (data[i] == '0') {
      n = 1;  // JSON forbids leading zeros: "01" is left to the general path
      if (is_digit(data[i + 1])) return std::nullopt;
    } else if (data[i] >= '1' && data[i] <= '9') {
      if (!small_digits(data + i, n, value)) return std::nullopt;
    } else {
      return std::nullopt;
    }
    const char next = data[i + n];
    if (next == '.' || next == 'e' || next == 'E') return std::nullopt;
    pos_ = i + n;
    return value;
  }

  JsonNumber parse_number() {
    // Fast path: a small non-negative integer (ids, sizes) ending the number.
    skip_whitespace();
    const char* data = text_.data();
    const size_t size = text_.size();
    size_t i = pos_;
    if constexpr (std::endian::native == std::endian::little) {
      // Up to 15 digits, two words at a time; needs 16 readable bytes.
      unsigned n = 0;
      uint64_t value = 0;
      if (size - i >= 16 && data[i] >= '1' && data[i] <= '9') {
        if (!small_digits(data + i, n, value)) return parse_number_slow();
        const char next = data[i + n];
        if (!(next == '.' || next == 'e' || next == 'E')) {
          JsonNumber number;
          number.text = text_.substr(pos_, n);
          number.magnitude = value;
          pos_ = i + n;
          return number;
        }
        return parse_number_slow();
      }
    }
    if (i < size && data[i] >= '1' && data[i] <= '9') {
      uint64_t value = 0;
      const size_t last = std::min(size, i + 19);  // 19 digits cannot overflow
      for (; i < last && is_digit(data[i]); ++i) value = value * 10 + uint64_t(data[i] - '0');
      if (i == size || !(is_digit(data[i]) || data[i] == '.' || data[i] == 'e' || data[i] == 'E')) {
        JsonNumber number;
        number.text = text_.substr(pos_, i - pos_);
        number.magnitude = value;
        pos_ = i;
        return number;
      }
    }
    return parse_number_slow();
  }
  void parse_null();
  // Skips any value (validating it) and returns its text.
  std::string_view skip_value() { return skip_value(0); }

  // Object iteration, step by step:
  //   if (cur.begin_object()) do { key = cur.read_key(); <read value> } while (cur.next_member());
  bool begin_object() {
    expect('{');
    return !consume('}');
  }
  // Reads `"key":`; the key is valid until the value is read.
  std::string_view read_key() {
    if (peek() != '"') error("expected a string (an object key)");
    const std::string_view key = parse_string();
    expect(':');
    return key;
  }
  // Reads `"key":` when the next key is exactly `quoted_key` (with its quotes,
  // no escapes): the fast path for objects whose keys come in a known order.
  bool try_key(std::string_view quoted_key) {
    skip_whitespace();
    if (text_.size() - pos_ < quoted_key.size()) return false;
    if (!same_bytes(text_.data() + pos_, quoted_key)) return false;
    pos_ += quoted_key.size();
    expect(':');
    return true;
  }
  // Consumes `literal` when the text continues with exactly these bytes (no
  // whitespace skipped): the canonical-layout fast path of the readers.
  bool try_literal(std::string_view literal) {
    if (text_.size() - pos_ < literal.size()) return false;
    if (std::memcmp(text_.data() + pos_, literal.data(), literal.size()) != 0) return false;
    pos_ += literal.size();
    return true;
  }
  // After a member's value: true when another member follows.
  bool next_member() {
    const char c = peek();
    if (c == ',') {
      ++pos_;
      return true;
    }
    if (c != '}') error("expected ',' or '}' after an object member");
    ++pos_;
    return false;
  }

  // Calls on_member(key) once per member of the object that starts here;
  // on_member must read the value. `key` is valid until the value is read.
  template <typename F>
  void for_each_member(F&& on_member) {
    if (!begin_object()) return;
    do {
      on_member(read_key());
    } while (next_member());
  }

  // Calls on_element(index) once per element of the array that starts here.
  template <typename F>
  void for_each_element(F&& on_element) {
    expect('[');
    if (consume(']')) return;
    for (size_t index = 0;; ++index) {
      on_element(index);
      const char c = peek();
      ++pos_;
      if (c == ',') continue;
      if (c == ']') return;
      --pos_;
      error("expected ',' or ']' after an array element");
    }
  }

  // Bytes not yet read.
  size_t remaining() const { return text_.size() - pos_; }
  // Offset into the text; seek() moves there (errors still count lines and
  // columns from the start of the text).
  size_t position() const { return pos_; }
  void seek(size_t pos) { pos_ = std::min(pos, text_.size()); }

  [[noreturn]] void error(std::string_view what) const;

 private:
  void skip_whitespace() {
    while (pos_ < text_.size()) {
      const auto c = static_cast<unsigned char>(text_[pos_]);
      if (c > ' ') return;  // the usual case, one compare
      if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return;
      ++pos_;
    }
  }
  // Index of the first '"', '\\', control character or non-ASCII byte at or
  // after `i`; the text's size when there is none. Eight bytes at a time.
  size_t find_special(size_t i) const {
    const char* data = text_.data();
    const size_t size = text_.size();
    if constexpr (std::endian::native == std::endian::little) {
      for (; i + 8 <= size; i += 8) {
        if (const uint64_t special = special_bytes(load8(data + i))) {
          return i + static_cast<size_t>(std::countr_zero(special)) / 8;
        }
      }
    }
    for (; i < size; ++i) {
      const auto c = static_cast<unsigned char>(data[i]);
      if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) return i;
    }
    return size;
  }
  // The value and count `n` of the 1..15 digits starting at `p` (the first
  // is 1..9; 16 bytes readable). False when there are more than 15.
  static bool small_digits(const char* p, unsigned& n, uint64_t& value) {
    static constexpr uint64_t kPow10[8] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000};
    const uint64_t first = load8(p);
    n = leading_digits(first);
    if (n < 8) {
      value = digits_value(first, n);
      return true;
    }
    const uint64_t second = load8(p + 8);
    const unsigned more = leading_digits(second);
    if (more == 8) return false;
    value = digits_value(first, 8) * kPow10[more] + (more ? digits_value(second, more) : 0);
    n += more;
    return true;
  }
  // High bit set in the byte of `word` that is the first '"', '\\', control
  // character or non-ASCII byte (bytes above it may be flagged spuriously:
  // only the lowest flag is exact, which is all parse_string uses).
  static uint64_t special_bytes(uint64_t word) {
    constexpr uint64_t kOnes = 0x0101010101010101;
    constexpr uint64_t kHigh = 0x8080808080808080;
    const auto zero_byte = [](uint64_t v) { return (v - kOnes) & ~v & kHigh; };
    return zero_byte(word ^ (kOnes * '"')) | zero_byte(word ^ (kOnes * '\\')) |
           ((word - kOnes * 0x20) & ~word & kHigh) | (word & kHigh);
  }
  // memcmp with a constant length compiles to a few word compares; keys are
  // short, so dispatch on the length.
  static bool same_bytes(const char* here, std::string_view key) {
    const auto same = [&](auto n) { return std::memcmp(here, key.data(), n) == 0; };
    switch (key.size()) {
      case 4:
        return same(std::integral_constant<size_t, 4>());
      case 5:
        return same(std::integral_constant<size_t, 5>());
      case 6:
        return same(std::integral_constant<size_t, 6>());
      case 7:
        return same(std::integral_constant<size_t, 7>());
      case 8:
        return same(std::integral_constant<size_t, 8>());
      case 9:
        return same(std::integral_constant<size_t, 9>());
      case 10:
        return same(std::integral_constant<size_t, 10>());
      case 11:
        return same(std::integral_constant<size_t, 11>());
      default:
        return std::memcmp(here, key.data(), key.size()) == 0;
    }
  }
  [[noreturn]] void expected(char c) const;
  JsonNumber parse_number_slow();
  std::string_view parse_string_slow(size_t start, size_t stop);
  uint32_t parse_hex4();
  std::string_view skip_value(int depth);
  void expect_literal(std::string_view literal);

  std::string_view text_;
  size_t pos_ = 0;
  std::string scratch_;  // decoded strings that contain escapes
  const char* format_;
  const char* context_kind_ = nullptr;
  size_t context_index_ = 0;
};

}  // namespace memwall::detail
