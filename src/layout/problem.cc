// Validation of a layout problem and the arena of a set of offsets (problem.h).
#include <algorithm>
#include <bit>
#include <limits>
#include <numeric>
#include <vector>

#include "memwall/base/error.h"
#include "memwall/graph/types.h"
#include "memwall/layout/problem.h"

namespace memwall {

void validate_problem(const LayoutProblem& problem) {
  if (!std::has_single_bit(problem.alignment) || problem.alignment > kMaxBytes) {
    fail("layout: alignment {} is not a power of two up to 2^62", problem.alignment);
  }
  if (problem.capacity > kMaxBytes) {
    fail("layout: capacity {} exceeds the limit of 2^62 bytes", problem.capacity);
  }
  const auto& buffers = problem.buffers;
  if (buffers.size() >= std::numeric_limits<uint32_t>::max()) {
    fail("layout: {} buffers; at most {} are supported", buffers.size(),
         std::numeric_limits<uint32_t>::max() - 1);
  }
  for (const LayoutBuffer& b : buffers) {
    if (b.lower >= b.upper) {
      fail("layout: buffer {}: lower {} is not below upper {}", b.id, b.lower, b.upper);
    }
    if (b.size == 0) fail("layout: buffer {}: size is 0", b.id);
    if (b.size > kMaxBytes) {
      fail("layout: buffer {}: size {} exceeds the limit of 2^62 bytes", b.id, b.size);
    }
  }
  // Sorting indices by id finds repeats in O(n log n); report the pair whose
  // second occurrence comes first, as a reader walking the list would.
  std::vector<uint32_t> by_id(buffers.size());
  std::iota(by_id.begin(), by_id.end(), uint32_t{0});
  std::stable_sort(by_id.begin(), by_id.end(),
                   [&](uint32_t a, uint32_t b) { return buffers[a].id < buffers[b].id; });
  size_t first = buffers.size(), second = buffers.size();
  for (size_t k = 1; k < by_id.size(); ++k) {
    if (buffers[by_id[k]].id == buffers[by_id[k - 1]].id && by_id[k] < second) {
      first = by_id[k - 1];
      second = by_id[k];
    }
  }
  if (second < buffers.size()) {
    fail("layout: buffer id {} is used twice (buffers at index {} and {})", buffers[second].id,
         first, second);
  }
}

uint64_t arena_of(const LayoutProblem& problem, const std::vector<uint64_t>& offsets) {
  if (offsets.size() != problem.buffers.size()) {
    fail("layout: {} offsets for {} buffers", offsets.size(), problem.buffers.size());
  }
  uint64_t arena = 0;
  for (size_t i = 0; i < offsets.size(); ++i) {
    arena = std::max(arena, checked_add(offsets[i], problem.buffers[i].size, "layout: arena"));
  }
  return arena;
}

}  // namespace memwall
