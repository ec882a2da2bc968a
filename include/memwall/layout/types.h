// Plain records of the static memory layout problem (issue "Static memory
// layout"): buffers with half-open lifetimes and sizes get byte offsets in
// one arena so that buffers alive at the same time do not overlap.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace memwall {

// Live on [lower, upper): two buffers conflict when their lifetimes
// intersect. `id` is the caller's name for it (a buffer id, a CSV id).
struct LayoutBuffer {
  int64_t id = 0;
  int64_t lower = 0;
  int64_t upper = 0;
  uint64_t size = 0;
};

struct LayoutProblem {
  std::vector<LayoutBuffer> buffers;
  uint64_t capacity = 0;   // arena bytes available; 0: unbounded
  uint64_t alignment = 1;  // every offset is a multiple of it (a power of two)
};

// offsets[i] is the offset of problem.buffers[i]; arena is the largest
// offset + size (0 for no buffers).
struct Layout {
  std::vector<uint64_t> offsets;
  uint64_t arena = 0;
};

}  // namespace memwall
