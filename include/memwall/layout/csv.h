// The `id,lower,upper,size` CSV of buffer lifetimes that MiniMalloc and
// idealloc read (header required), optionally with a fifth `offset` column
// as MiniMalloc writes its solutions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "memwall/layout/types.h"

namespace memwall {

struct LayoutCsv {
  LayoutProblem problem;         // capacity 0 (unbounded), alignment 1
  std::optional<Layout> layout;  // present when the file has an offset column
};

// Strict: any deviation throws Error "csv: line N: <what>" (one line): a
// header other than "id,lower,upper,size" or "id,lower,upper,size,offset", a
// wrong number of fields, an empty line, a field that is not a decimal
// integer, a negative or overflowing value (ids and times up to 2^63-1, sizes
// and offsets up to 2^62), a repeated id, lower not below upper, a size of 0.
// Lines end with "\n" or "\r\n"; the last one may omit it.
LayoutCsv layout_from_csv(std::string_view text);
// The same from a file; errors are prefixed with the path.
LayoutCsv read_layout_csv(const std::string& path);
// MiniMalloc names its inputs NAME.CAPACITY.csv: the capacity to fit in a
// file name (0 when the name carries none).
uint64_t capacity_from_csv_name(const std::string& file);

// "id,lower,upper,size" rows, or with an `offset` column when a layout is
// given (its offsets must match the buffers: Error otherwise).
std::string layout_to_csv(const LayoutProblem& problem);
std::string layout_to_csv(const LayoutProblem& problem, const Layout& layout);
// Written atomically (write_file_atomically).
void write_layout_csv(const std::string& path, const LayoutProblem& problem, const Layout& layout);

}  // namespace memwall
