// The validator (check_layout), problem validation and the lower bounds.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "memwall/base/error.h"
#include "memwall/graph/types.h"
#include "memwall/layout/problem.h"
#include "problems.h"

namespace memwall {
namespace {

using testing::problem;

std::string problem_error(const LayoutProblem& p) {
  try {
    validate_problem(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "valid";
}

// ---- validate_problem -----------------------------------------------------------

TEST(ValidateProblem, RejectsWithOneLine) {
  const uint64_t too_big = kMaxBytes + 1;
  LayoutProblem p = problem({{0, 4, 8}, {2, 6, 8}});
  EXPECT_EQ(problem_error(p), "valid");

  LayoutProblem empty_life = p;
  empty_life.buffers[1] = {.id = 7, .lower = 5, .upper = 5, .size = 8};
  EXPECT_EQ(problem_error(empty_life), "layout: buffer 7: lower 5 is not below upper 5");
  LayoutProblem backwards = p;
  backwards.buffers[1] = {.id = 7, .lower = 6, .upper = -2, .size = 8};
  EXPECT_EQ(problem_error(backwards), "layout: buffer 7: lower 6 is not below upper -2");

  LayoutProblem zero = p;
  zero.buffers[0].size = 0;
  EXPECT_EQ(problem_error(zero), "layout: buffer 0: size is 0");
  LayoutProblem huge = p;
  huge.buffers[1].size = too_big;
  EXPECT_EQ(problem_error(huge),
            "layout: buffer 1: size 4611686018427387905 exceeds the limit of 2^62 bytes");
  LayoutProblem at_limit = p;
  at_limit.buffers[1].size = kMaxBytes;
  EXPECT_EQ(problem_error(at_limit), "valid");

  for (const uint64_t alignment : {uint64_t{0}, uint64_t{3}, uint64_t{12}, kMaxBytes * 2}) {
    LayoutProblem a = p;
    a.alignment = alignment;
    EXPECT_EQ(problem_error(a), "layout: alignment " + std::to_string(alignment) +
                                    " is not a power of two up to 2^62");
  }
  LayoutProblem capacity = p;
  capacity.capacity = too_big;
  EXPECT_EQ(problem_error(capacity),
            "layout: capacity 4611686018427387905 exceeds the limit of 2^62 bytes");

  // The repeat reported is the first one a reader meets (index 2, not 3).
  LayoutProblem repeated = problem({{0, 1, 1}, {0, 1, 1}, {0, 1, 1}, {0, 1, 1}});
  repeated.buffers[0].id = 5;
  repeated.buffers[1].id = 6;
  repeated.buffers[2].id = 5;
  repeated.buffers[3].id = 6;
  EXPECT_EQ(problem_error(repeated),
            "layout: buffer id 5 is used twice (buffers at index 0 and 2)");
}

// ---- check_layout ---------------------------------------------------------------

// ids 10 [0,4) 16, 11 [2,6) 8, 12 [4,8) 8. Valid: 10@0, 11@16, 12@0 (12
// starts when 10 ends: half-open lifetimes do not meet).
LayoutProblem three() {
  LayoutProblem p = problem({{0, 4, 16}, {2, 6, 8}, {4, 8, 8}});
  for (size_t i = 0; i < 3; ++i) p.buffers[i].id = static_cast<int64_t>(10 + i);
  return p;
}

struct CheckCase {
  std::string label;
  uint64_t alignment;
  uint64_t capacity;
  std::vector<uint64_t> offsets;
  uint64_t arena;
  std::string expected;  // empty: valid
};

TEST(CheckLayout, NamesTheFirstViolation) {
  const std::vector<CheckCase> cases = {
      {"valid", 1, 0, {0, 16, 0}, 24, ""},
      {"valid at capacity", 8, 24, {0, 16, 0}, 24, ""},
      {"overlap with the buffer below",
       1,
       0,
       {0, 8, 0},
       16,
       "layout: buffers 10 (live [0, 4), bytes [0, 16)) and 11 (live [2, 6), bytes [8, 16)) "
       "overlap"},
      {"overlap with the buffer above",
       1,
       0,
       {8, 4, 0},
       24,
       "layout: buffers 10 (live [0, 4), bytes [8, 24)) and 11 (live [2, 6), bytes [4, 12)) "
       "overlap"},
      {"same offset",
       1,
       0,
       {0, 16, 16},
       24,
       "layout: buffers 11 (live [2, 6), bytes [16, 24)) and 12 (live [4, 8), bytes [16, 24)) "
       "overlap"},
      {"misaligned",
       8,
       0,
       {0, 20, 0},
       28,
       "layout: buffer 11 at offset 20 is not a multiple of the alignment 8"},
      {"wrong arena", 1, 0, {0, 16, 0}, 30, "layout: arena is 30 but the buffers end at 24"},
      {"over capacity",
       1,
       20,
       {0, 16, 0},
       24,
       "layout: arena 24 exceeds the capacity 20 (buffer 11 ends at 24)"},
      {"too few offsets", 1, 0, {0, 16}, 24, "layout: 2 offsets for 3 buffers"},
      {"offset beyond 2^62",
       1,
       0,
       {kMaxBytes + 1, 16, 0},
       0,
       "layout: buffer 10 at offset 4611686018427387905 with size 16 is beyond 2^62 bytes"},
  };
  for (const CheckCase& c : cases) {
    SCOPED_TRACE(c.label);
    LayoutProblem p = three();
    p.alignment = c.alignment;
    p.capacity = c.capacity;
    const std::optional<std::string> error = check_layout(p, Layout{c.offsets, c.arena});
    EXPECT_EQ(error.value_or(""), c.expected);
  }
}

TEST(CheckLayout, SweepsLargeProblemsFast) {
  // 50,000 buffers in a staircase: each overlaps the next in time and sits
  // just above it in address; the last one is moved onto buffer 0's range,
  // which is still live only if the sweep keeps long-lived buffers.
  LayoutProblem p;
  Layout layout;
  p.buffers.push_back({.id = 0, .lower = 0, .upper = 100000, .size = 1});
  layout.offsets.push_back(0);
  for (int64_t i = 1; i < 50000; ++i) {
    p.buffers.push_back({.id = i, .lower = i, .upper = i + 2, .size = 4});
    layout.offsets.push_back(1 + 4 * static_cast<uint64_t>(i % 2));
  }
  layout.arena = 9;
  EXPECT_EQ(check_layout(p, layout), std::nullopt);
  layout.offsets.back() = 0;
  EXPECT_EQ(check_layout(p, layout),
            "layout: buffers 0 (live [0, 100000), bytes [0, 1)) and 49999 (live [49999, 50001), "
            "bytes [0, 4)) overlap");
}

// ---- bounds ----------------------------------------------------------------------

TEST(Bounds, LiveBytes) {
  EXPECT_EQ(live_lower_bound(LayoutProblem{}), 0u);
  // Touching lifetimes never add up.
  EXPECT_EQ(live_lower_bound(problem({{0, 2, 5}, {2, 4, 7}})), 7u);
  EXPECT_EQ(live_lower_bound(problem({{0, 3, 5}, {2, 4, 7}})), 12u);
  // t5: 8 + 16 + 8 + 64.
  EXPECT_EQ(live_lower_bound(testing::tflite_complex()), 96u);
  EXPECT_EQ(live_lower_bound(testing::staircase()), 24u);
}

TEST(Bounds, AlignmentRaisesTheBound) {
  // Chain with alignment 128: at [3,4) buffers of 64 and 32 bytes are live
  // (96 bytes), but whichever is lower pushes the other to 128 at least:
  // rounded sizes 128 + 128 minus the larger slack (128 - 32 = 96) = 160,
  // which greedy by size reaches: the bound is tight here.
  const LayoutProblem chain = testing::tflite_chain_aligned();
  EXPECT_EQ(live_lower_bound(chain), 96u);
  EXPECT_EQ(arena_lower_bound(chain), 160u);
  // Alignment 1: the same as live bytes.
  EXPECT_EQ(arena_lower_bound(testing::tflite_complex()), 96u);
  // One buffer: its size, never rounded (the arena ends where it ends).
  EXPECT_EQ(arena_lower_bound(problem({{0, 1, 5}}, 64)), 5u);
  // Three live 5-byte buffers at alignment 8: 8 + 8 + 5.
  EXPECT_EQ(arena_lower_bound(problem({{0, 1, 5}, {0, 1, 5}, {0, 1, 5}}, 8)), 21u);
  // A buffer that ended no longer counts, nor does its slack.
  EXPECT_EQ(arena_lower_bound(problem({{0, 1, 1}, {1, 3, 8}, {2, 3, 8}}, 8)), 16u);
}

TEST(Bounds, OverflowIsAnError) {
  const LayoutProblem p = problem({{0, 2, kMaxBytes}, {1, 3, kMaxBytes}});
  for (const auto bound : {live_lower_bound, arena_lower_bound}) {
    try {
      bound(p);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(),
                   "layout: bytes live at one time exceeds the limit of 2^62 bytes "
                   "(4611686018427387904 + 4611686018427387904)");
    }
  }
}

TEST(Bounds, ArenaOf) {
  const LayoutProblem p = three();
  EXPECT_EQ(arena_of(p, {0, 16, 0}), 24u);
  EXPECT_EQ(arena_of(LayoutProblem{}, {}), 0u);
  EXPECT_THROW(arena_of(p, {0}), Error);
}

}  // namespace
}  // namespace memwall
