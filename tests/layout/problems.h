// Test helper: small layout problems written as (lower, upper, size) rows,
// ids 0, 1, 2, ... in row order.
#pragma once

#include <cstdint>
#include <vector>

#include "memwall/layout/types.h"

namespace memwall::testing {

struct Row {
  int64_t lower;
  int64_t upper;
  uint64_t size;
};

inline LayoutProblem problem(const std::vector<Row>& rows, uint64_t alignment = 1) {
  LayoutProblem p;
  p.alignment = alignment;
  for (const Row& r : rows) {
    p.buffers.push_back({.id = static_cast<int64_t>(p.buffers.size()),
                         .lower = r.lower,
                         .upper = r.upper,
                         .size = r.size});
  }
  return p;
}

// TFLite's "ComplexRecords" instance (tensorflow/lite/delegates/gpu/common/
// memory_management_test.cc): nine tensors whose inclusive usage intervals
// [first, last] are [first, last + 1) here.
inline LayoutProblem tflite_complex() {
  return problem({{0, 2, 32},
                  {1, 5, 32},
                  {2, 6, 8},
                  {3, 6, 16},
                  {4, 6, 8},
                  {5, 8, 64},
                  {6, 9, 8},
                  {7, 9, 8},
                  {8, 10, 16}});
}

// TFLite's "OffsetAssignmentWithAlignment" chain (same test file): five
// tensors, each overlapping the next, with 128-byte alignment.
inline LayoutProblem tflite_chain_aligned() {
  return problem({{0, 2, 16}, {1, 3, 8}, {2, 4, 64}, {3, 5, 32}, {4, 6, 8}}, 128);
}

// A staircase on which ordering by size loses and ordering by breadth wins:
// 0 [0,1) 10, 1 [0,2) 9, 2 [1,2) 8, 3 [1,2) 7. The peak (24) is at [1,2).
inline LayoutProblem staircase() { return problem({{0, 1, 10}, {0, 2, 9}, {1, 2, 8}, {1, 2, 7}}); }

}  // namespace memwall::testing
