// CSV output of a layout problem, with or without offsets (csv.h).
#include <iterator>
#include <string>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/base/output_files.h"
#include "memwall/layout/csv.h"

namespace memwall {
namespace {

std::string to_csv(const LayoutProblem& problem, const Layout* layout) {
  const auto& buffers = problem.buffers;
  if (layout != nullptr && layout->offsets.size() != buffers.size()) {
    fail("layout: {} offsets for {} buffers", layout->offsets.size(), buffers.size());
  }
  fmt::memory_buffer out;
  out.reserve(32 * (buffers.size() + 1));
  const auto it = std::back_inserter(out);
  fmt::format_to(it, "id,lower,upper,size{}\n", layout ? ",offset" : "");
  for (size_t i = 0; i < buffers.size(); ++i) {
    const LayoutBuffer& b = buffers[i];
    if (layout) {
      fmt::format_to(it, "{},{},{},{},{}\n", b.id, b.lower, b.upper, b.size, layout->offsets[i]);
    } else {
      fmt::format_to(it, "{},{},{},{}\n", b.id, b.lower, b.upper, b.size);
    }
  }
  return fmt::to_string(out);
}

}  // namespace

std::string layout_to_csv(const LayoutProblem& problem) { return to_csv(problem, nullptr); }

std::string layout_to_csv(const LayoutProblem& problem, const Layout& layout) {
  return to_csv(problem, &layout);
}

void write_layout_csv(const std::string& path, const LayoutProblem& problem, const Layout& layout) {
  write_file_atomically(path, layout_to_csv(problem, layout));
}

}  // namespace memwall
