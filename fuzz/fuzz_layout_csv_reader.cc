// libFuzzer target for the lifetimes CSV reader: any input must either parse
// into a problem that validates, writes back to a CSV that reads to the same
// problem, and gets a valid layout from a heuristic; or be rejected with
// memwall::Error. Any other exception, crash or sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "memwall/base/error.h"
#include "memwall/layout/csv.h"
#include "memwall/layout/heuristics.h"
#include "memwall/layout/problem.h"

namespace {

bool same_buffers(const memwall::LayoutProblem& a, const memwall::LayoutProblem& b) {
  if (a.buffers.size() != b.buffers.size()) return false;
  for (size_t i = 0; i < a.buffers.size(); ++i) {
    const auto &x = a.buffers[i], &y = b.buffers[i];
    if (x.id != y.id || x.lower != y.lower || x.upper != y.upper || x.size != y.size) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  memwall::LayoutCsv csv;
  try {
    csv = memwall::layout_from_csv(text);
  } catch (const memwall::Error&) {
    return 0;  // rejected with a message: the expected outcome for malformed input
  }
  // What the reader accepts is a valid problem that round-trips.
  memwall::validate_problem(csv.problem);
  if (!same_buffers(memwall::layout_from_csv(memwall::layout_to_csv(csv.problem)).problem,
                    csv.problem)) {
    __builtin_trap();
  }
  try {
    // Sizes are bounded (2^62) but their sum may not be: the bound says so
    // with an Error, and then so must the heuristic.
    memwall::live_lower_bound(csv.problem);
    const memwall::Layout layout = memwall::greedy_by_size(csv.problem);
    if (memwall::check_layout(csv.problem, layout)) __builtin_trap();
    if (csv.layout) (void)memwall::check_layout(csv.problem, *csv.layout);
  } catch (const memwall::Error&) {
    // Live bytes or an arena beyond 2^62.
  }
  return 0;
}
