// Object readers shared by the strict readers of memwall's JSON formats:
// the first problem found in an object (reported once the object has been
// read, so that the message can name it), its set of known fields, and the
// value readers the graph and plan formats share.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/base/json_cursor.h"
#include "memwall/base/quote.h"

namespace memwall::detail {

// The first problem found in one object.
class Problem {
 public:
  template <typename... Args>
  void note(fmt::format_string<Args...> format, Args&&... args) {
    if (text_.empty()) text_ = fmt::format(format, std::forward<Args>(args)...);
  }
  bool any() const { return !text_.empty(); }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// The fields of one object: reads keys, detects duplicates and missing
// required fields. Names are stored with their quotes for JsonCursor::try_key.
template <size_t N>
class Fields {
 public:
  explicit Fields(const std::array<std::string_view, N>& quoted_names) : names_(quoted_names) {}

  // Calls on_field(index) for each member of the object that starts here;
  // index is -1 (and a problem is noted) for an unknown or repeated key.
  template <typename F>
  void read(JsonCursor& cur, Problem& problem, F&& on_field) {
    if (!cur.begin_object()) return;
    do {
      // Writers emit fields in order: try the expected key on the raw text.
      int index = -1;
      if (next_ < N && cur.try_key(names_[next_])) {
        index = mark(next_, problem);
      } else {
        index = find(cur.read_key(), problem);
      }
      on_field(index);
    } while (cur.next_member());
  }

  bool has(size_t i) const { return (seen_ & (1U << i)) != 0; }
  std::string_view name(size_t i) const { return names_[i].substr(1, names_[i].size() - 2); }
  void require(std::initializer_list<size_t> required, Problem& problem) const {
    for (const size_t i : required) {
      if (!has(i)) problem.note("missing field \"{}\"", name(i));
    }
  }

 private:
  int find(std::string_view key, Problem& problem) {
    for (size_t i = 0; i < N; ++i) {
      if (name(i) == key) return mark(i, problem);
    }
    problem.note("unknown field {}", in_quotes(key));
    return -1;
  }
  int mark(size_t i, Problem& problem) {
    if (has(i)) {
      problem.note("duplicate field \"{}\"", name(i));
      return -1;
    }
    seen_ |= 1U << i;
    next_ = i + 1;
    return static_cast<int>(i);
  }

  const std::array<std::string_view, N>& names_;
  uint32_t seen_ = 0;
  size_t next_ = 0;
};

// Number text as shown in a message (numbers can be arbitrarily long).
inline std::string_view shown_number(std::string_view number) {
  return number.size() <= 40 ? number : number.substr(0, 40);
}

// ---- Values: on a bad one they note a problem and skip it. ---------------------

// A non-negative integer up to `max`. `label()` names the value in a message
// ("\"budget\""); it is only called on a problem, so building it costs nothing
// on the hot path.
template <typename Label>
uint64_t read_uint(JsonCursor& cur, uint64_t max, Problem& problem, Label label) {
  if (!cur.at_number()) {
    problem.note("{} must be a non-negative integer, got {}", label(), type_name(cur.peek_type()));
    cur.skip_value();
    return 0;
  }
  const JsonNumber n = cur.parse_number();
  if (!n.integer || n.negative) {
    problem.note("{} must be a non-negative integer, got {}", label(), shown_number(n.text));
    return 0;
  }
  if (!n.fits_u64 || n.magnitude > max) {
    if (max == kMaxBytes) {
      problem.note("{} is {}, above the limit of 2^62 bytes", label(), shown_number(n.text));
    } else {
      problem.note("{} is {}, above the limit of {}", label(), shown_number(n.text), max);
    }
    return 0;
  }
  return n.magnitude;
}

// The value of string field `field`.
inline std::optional<std::string_view> read_string(JsonCursor& cur, std::string_view field,
                                                   Problem& problem) {
  if (!cur.at_string()) {
    problem.note("\"{}\" must be a string, got {}", field, type_name(cur.peek_type()));
    cur.skip_value();
    return std::nullopt;
  }
  return cur.parse_string();
}

}  // namespace memwall::detail
