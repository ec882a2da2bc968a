// The strict reader of `id,lower,upper,size[,offset]` CSV (csv.h). One pass
// over the text without copying it; every error names its 1-based line.
#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/base/file_text.h"
#include "memwall/graph/types.h"
#include "memwall/layout/csv.h"

namespace memwall {
namespace {

constexpr std::string_view kHeader = "id,lower,upper,size";
constexpr std::string_view kOffsetColumn = ",offset";
constexpr std::string_view kHeaderWithOffset = "id,lower,upper,size,offset";
constexpr std::array<std::string_view, 5> kColumns = {"id", "lower", "upper", "size", "offset"};
constexpr uint64_t kMaxTime = std::numeric_limits<int64_t>::max();

// A field as it appears in a message: quoted, at most 24 characters, with
// anything unprintable escaped so that the message stays one line.
std::string quoted(std::string_view field) {
  std::string out = "\"";
  for (size_t k = 0; k < field.size() && k < 24; ++k) {
    const auto c = static_cast<unsigned char>(field[k]);
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (field.size() > 24) out += "...";
  return out + "\"";
}

class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  LayoutCsv read() {
    std::string_view header;
    if (!next_line(header)) fail("csv: empty file (no header \"{}\")", kHeader);
    if (header.empty()) fail("csv: line 1: empty line where the header \"{}\" belongs", kHeader);
    const bool with_offset = header == kHeaderWithOffset;
    if (header != kHeader && !with_offset) {
      fail("csv: line 1: header {} is not \"{}\" (optionally followed by \"{}\")", quoted(header),
           kHeader, kOffsetColumn);
    }
    const size_t columns = with_offset ? 5 : 4;
    LayoutCsv result;
    std::vector<uint64_t> offsets;
    std::unordered_map<int64_t, size_t> line_of_id;
    // One row per remaining line: counting them first avoids regrowth and,
    // unlike a guess from the length, never reserves more than is needed.
    const auto rows = static_cast<size_t>(std::count(text_.begin() + std::min(pos_, text_.size()),
                                                     text_.end(), '\n')) +
                      1;
    result.problem.buffers.reserve(rows);
    line_of_id.reserve(rows);
    std::string_view line;
    while (next_line(line)) {
      if (line.empty()) fail("csv: line {}: empty line", line_);
      std::array<std::string_view, 5> fields;
      const size_t found = split(line, fields);
      if (found != columns) {
        fail("csv: line {}: expected {} fields, found {}", line_, columns, found);
      }
      std::array<uint64_t, 5> v{};
      for (size_t c = 0; c < columns; ++c) v[c] = number(fields[c], c);
      const LayoutBuffer buffer{.id = static_cast<int64_t>(v[0]),
                                .lower = static_cast<int64_t>(v[1]),
                                .upper = static_cast<int64_t>(v[2]),
                                .size = v[3]};
      if (buffer.lower >= buffer.upper) {
        fail("csv: line {}: lower {} is not below upper {}", line_, buffer.lower, buffer.upper);
      }
      if (buffer.size == 0) fail("csv: line {}: size is 0", line_);
      const auto [it, fresh] = line_of_id.emplace(buffer.id, line_);
      if (!fresh) {
        fail("csv: line {}: duplicate id {} (first on line {})", line_, buffer.id, it->second);
      }
      result.problem.buffers.push_back(buffer);
      if (with_offset) offsets.push_back(v[4]);
    }
    if (with_offset) {
      Layout layout;
      for (size_t i = 0; i < offsets.size(); ++i) {
        // Both at most 2^62: the sum cannot wrap.
        layout.arena = std::max(layout.arena, offsets[i] + result.problem.buffers[i].size);
      }
      layout.offsets = std::move(offsets);
      result.layout = std::move(layout);
    }
    return result;
  }

 private:
  // The next line without its "\n" or "\r\n"; false at the end of the text.
  bool next_line(std::string_view& line) {
    if (pos_ >= text_.size()) return false;
    ++line_;
    const void* nl = std::memchr(text_.data() + pos_, '\n', text_.size() - pos_);
    const size_t end =
        nl ? static_cast<size_t>(static_cast<const char*>(nl) - text_.data()) : text_.size();
    line = text_.substr(pos_, end - pos_);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos_ = end + 1;
    return true;
  }

  // Splits at commas into up to five fields; returns how many there are.
  static size_t split(std::string_view line, std::array<std::string_view, 5>& fields) {
    size_t count = 0, start = 0;
    while (true) {
      const size_t comma = line.find(',', start);
      const size_t end = comma == std::string_view::npos ? line.size() : comma;
      if (count < fields.size()) fields[count] = line.substr(start, end - start);
      ++count;
      if (comma == std::string_view::npos) return count;
      start = comma + 1;
    }
  }

  // A non-negative decimal integer within its column's limit.
  uint64_t number(std::string_view field, size_t column) const {
    const std::string_view name = kColumns[column];
    if (field.empty()) fail("csv: line {}: {} is empty", line_, name);
    const bool minus = field.front() == '-';
    const std::string_view digits = minus ? field.substr(1) : field;
    const bool all_digits =
        !digits.empty() && digits.find_first_not_of("0123456789") == std::string_view::npos;
    // "-0" is no plain non-negative integer either.
    const bool negative = minus && digits.find_first_not_of('0') != std::string_view::npos;
    if (all_digits && negative) fail("csv: line {}: {} {} is negative", line_, name, quoted(field));
    if (!all_digits || minus) {
      fail("csv: line {}: {} {} is not an integer", line_, name, quoted(field));
    }
    uint64_t value = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    const bool is_size = column >= 3;
    const uint64_t limit = is_size ? kMaxBytes : kMaxTime;
    if (error != std::errc() || end != digits.data() + digits.size() || value > limit) {
      fail("csv: line {}: {} {} exceeds the limit of {}", line_, name, quoted(field),
           is_size ? "2^62" : "2^63 - 1");
    }
    return value;
  }

  std::string_view text_;
  size_t pos_ = 0;
  size_t line_ = 0;  // number of the line last returned
};

}  // namespace

LayoutCsv layout_from_csv(std::string_view text) { return Reader(text).read(); }

LayoutCsv read_layout_csv(const std::string& path) {
  const FileText file(path);
  try {
    return layout_from_csv(file.text());
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
}

// Parsed by hand: std::regex trips g++ 12's -Wmaybe-uninitialized in
// sanitizer builds.
uint64_t capacity_from_csv_name(const std::string& file) {
  constexpr std::string_view kSuffix = ".csv";
  if (file.size() <= kSuffix.size() || !file.ends_with(kSuffix)) return 0;
  const size_t end = file.size() - kSuffix.size();
  size_t start = end;
  while (start > 0 && file[start - 1] >= '0' && file[start - 1] <= '9') --start;
  if (start == end || end - start > 18 || start == 0 || file[start - 1] != '.') return 0;
  return std::stoull(file.substr(start, end - start));
}

}  // namespace memwall
