// Golden layouts of every heuristic on small problems, each worked out by
// hand from the algorithm's rules (comments give the steps; "a@o" is buffer a
// at offset o, "[x,y)" an address range, gaps and tops are among the buffer's
// placed conflicts only).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "memwall/base/error.h"
#include "memwall/layout/heuristics.h"
#include "memwall/layout/placement.h"
#include "memwall/layout/problem.h"
#include "problems.h"

namespace memwall {
namespace {

using testing::problem;

struct Golden {
  std::string label;
  LayoutProblem problem;
  Layout (*algorithm)(const LayoutProblem&);
  std::vector<uint64_t> offsets;
  uint64_t arena;
};

std::vector<Golden> goldens() {
  const LayoutProblem complex = testing::tflite_complex();
  const LayoutProblem chain = testing::tflite_chain_aligned();
  const LayoutProblem stairs = testing::staircase();
  return {
      // ---- greedy by size (best gap) ----
      // Order by size: 5(64) 0(32) 1(32) 3(16) 8(16) 2(8) 4(8) 6(8) 7(8).
      // 5@0. 0: no conflict, @0. 1 [1,5): meets 0 [0,32), no gap: @32.
      // 3 [3,6): meets 5 [0,64), 1 [32,64): @64. 8 [8,10): meets nothing: @0.
      // 2 [2,6): meets 5, 1, 3 [64,80): @80. 4 [4,6): meets 5, 1, 3, 2: @88.
      // 6 [6,9): meets 5 [0,64), 8 [0,16): @64. 7 [7,9): meets 5, 8, 6: @72.
      // The same offsets as TFLite's own test expects (0 32 80 64 88 0 64 72 0, 96).
      {"size/tflite complex", complex, greedy_by_size, {0, 32, 80, 64, 88, 0, 64, 72, 0}, 96},
      // 2@0; 3 meets 2, whose end 64 rounds up to 128: @128. 0 meets
      // nothing: @0. 1 [1,3) meets 0 and 2 (tops 128): @128. 4 meets only 3
      // [128,160): the gap [0,128) holds it, @0. TFLite expects the same.
      {"size/tflite chain aligned", chain, greedy_by_size, {0, 128, 0, 128, 0}, 160},
      // Order 0 1 2 3. 0@0 [0,10). 1 meets 0: @10 [10,19). 2 [1,2) meets 1:
      // the gap [0,10) holds 8, @0. 3 meets 2 [0,8) and 1 [10,19): the gap
      // [8,10) is too small: @19, arena 26 (the peak is 24).
      {"size/staircase", stairs, greedy_by_size, {0, 10, 0, 19}, 26},

      // ---- greedy by breadth ----
      // Breadth per time: t0 32, t1 64, t2 40, t3 56, t4 64, t5 96, t6 72,
      // t7 80, t8 32, t9 16. t5 first: 5(64)@0, 3(16)@64, 2(8)@80, 4(8)@88.
      // t7: 6 meets 5: @64; 7 meets 5, 6: @72. t6 nothing new. t1: 0 meets
      // nothing placed: @0; 1 [1,5) meets 0 [0,32), 3 [64,80), 2, 4: the
      // gap [32,64) holds 32 exactly: @32. t8: 8 meets 6 [64,72), 7 [72,80):
      // gap [0,64): @0. The same layout as by size.
      {"breadth/tflite complex", complex, greedy_by_breadth, {0, 32, 80, 64, 88, 0, 64, 72, 0}, 96},
      // Breadths 16 24 72 96 40 8. t3: 2@0, 3@128. t2: 1 meets 2 (top
      // 128): @128. t4: 4 meets 3 [128,160): gap [0,128): @0. t1: 0 meets 1
      // [128,136): @0.
      {"breadth/tflite chain aligned", chain, greedy_by_breadth, {0, 128, 0, 128, 0}, 160},
      // Breadth t0 19, t1 24. t1 first: 1(9)@0, 2(8)@9, 3(7)@17. t0: 0
      // meets 1 [0,9): @9. Arena 24, the lower bound.
      {"breadth/staircase", stairs, greedy_by_breadth, {9, 0, 9, 17}, 24},

      // ---- greedy by conflicts (above every placed conflict) ----
      // Conflicts: 0:1 1:4 2:4 3:4 4:4 5:5 6:3 7:3 8:2. Order 5, 1 3 2 4
      // (size desc), 6 7, 8, 0. 5@0. 1 meets nothing placed: @0. 3 above 1
      // (32) and 5 (64): @64. 2 above 1, 5, 3 (80): @80. 4: @88. 6 above 5:
      // @64. 7 above 5, 6 (72): @72. 8 above 6, 7 (80): @80. 0 above 1: @32.
      {"conflicts/tflite complex",
       complex,
       greedy_by_conflicts,
       {32, 0, 80, 64, 88, 0, 64, 72, 80},
       96},
      // Conflicts 1 2 2 2 1: order 2 3 1 (size), 0 4. 2@0. 3 above 2 (end 64
      // -> 128): @128. 1 above 2: @128. 0 above 1 (136 -> 256): @256. 4
      // above 3 (160 -> 256): @256. No gap is ever reused: arena 272.
      {"conflicts/tflite chain aligned", chain, greedy_by_conflicts, {256, 128, 0, 128, 256}, 272},
      // Conflicts 1 3 2 2: order 1, 2, 3, 0. 1@0, 2@9, 3@17, 0 above 1: @9.
      {"conflicts/staircase", stairs, greedy_by_conflicts, {9, 0, 9, 17}, 24},

      // ---- XLA best fit, spatial order (size, then duration) ----
      // Order 5, 1 0 (32: durations 4, 2), 3 8, 2 6 4 7. "heap" is the arena.
      // 5@0 heap 64. 1 meets nothing: top gap [0,64): @0. 0 meets 1: top gap
      // [32,64) holds 32: @32. 3 meets 1, 5: @64, heap 80. 8 meets nothing:
      // @0. 2 meets 1, 5, 3: @80, heap 88. 6 meets 5, 8: top gap [64,88):
      // @64. 4 meets 1, 2, 3, 5: @88, heap 96. 7 meets 5, 6, 8: top gap
      // [72,96): @72.
      {"best fit by size/tflite complex",
       complex,
       heap_best_fit_by_size,
       {32, 0, 80, 64, 88, 0, 64, 72, 0},
       96},
      // 2@0, 3@128 (heap 160), 0 in the top gap [0,160) @0, 1 meets 0 and 2:
      // top gap [128,160) @128, 4 meets 3: gap [0,128) @0.
      {"best fit by size/tflite chain aligned",
       chain,
       heap_best_fit_by_size,
       {0, 128, 0, 128, 0},
       160},
      // Sizes are distinct: as greedy by size, @0 @10 @0 @19, heap 26.
      {"best fit by size/staircase", stairs, heap_best_fit_by_size, {0, 10, 0, 19}, 26},

      // ---- XLA best fit, temporal order (duration, then size) ----
      // Order 1 2 (duration 4), 5 3 6 (3), 0 8 4 7 (2). 1@0 heap 32. 2 meets
      // 1: @32 heap 40. 5 [5,8) meets 2 [32,40): gap [0,32) too small: @40
      // heap 104. 3 meets 1, 2, 5: @104 heap 120. 6 meets 5 [40,104): gap
      // [0,40) vs top gap [104,120): the top one is smaller, @104. 0 meets 1:
      // top gap [32,120): @32. 8 meets 6 [104,112): gap [0,104) (top gap
      // [112,120) too small): @0. 4 meets 1, 2, 5, 3: @120 heap 128. 7 meets
      // 8 [0,16), 5 [40,104), 6 [104,112): gap [16,40) vs top gap [112,128):
      // @112.
      {"best fit by duration/tflite complex",
       complex,
       heap_best_fit_by_duration,
       {32, 0, 32, 104, 120, 40, 104, 112, 0},
       128},
      // Equal durations: the order is by size, as the spatial one.
      {"best fit by duration/tflite chain aligned",
       chain,
       heap_best_fit_by_duration,
       {0, 128, 0, 128, 0},
       160},
      // Order 1 (duration 2), 0 2 3. 1@0 heap 9. 0 meets 1: @9 heap 19. 2
      // meets 1: top gap [9,19) holds 8: @9. 3 meets 1, 2 [9,17): top gap
      // [17,19) too small: @17, heap 24.
      {"best fit by duration/staircase", stairs, heap_best_fit_by_duration, {9, 0, 9, 17}, 24},

      // ---- XLA: the better of the two (spatial on a tie) ----
      {"best fit/tflite complex", complex, heap_best_fit, {32, 0, 80, 64, 88, 0, 64, 72, 0}, 96},
      {"best fit/staircase", stairs, heap_best_fit, {9, 0, 9, 17}, 24},
  };
}

TEST(Heuristics, GoldenLayouts) {
  for (const Golden& g : goldens()) {
    SCOPED_TRACE(g.label);
    const Layout layout = g.algorithm(g.problem);
    EXPECT_EQ(layout.offsets, g.offsets);
    EXPECT_EQ(layout.arena, g.arena);
    EXPECT_EQ(check_layout(g.problem, layout), std::nullopt);
  }
}

TEST(Heuristics, EmptyAndTrivialProblems) {
  const LayoutProblem empty;
  // Disjoint lifetimes share offset 0; one buffer sits at 0.
  const LayoutProblem disjoint = problem({{0, 1, 5}, {1, 2, 7}, {5, 9, 3}});
  for (const LayoutHeuristic& h : layout_heuristics()) {
    SCOPED_TRACE(std::string(h.name));
    const Layout none = h.run(empty);
    EXPECT_TRUE(none.offsets.empty());
    EXPECT_EQ(none.arena, 0u);
    const Layout flat = h.run(disjoint);
    EXPECT_EQ(flat.offsets, (std::vector<uint64_t>{0, 0, 0}));
    EXPECT_EQ(flat.arena, 7u);
  }
}

TEST(Heuristics, RejectInvalidProblems) {
  LayoutProblem bad = problem({{3, 3, 8}});
  for (const LayoutHeuristic& h : layout_heuristics()) {
    SCOPED_TRACE(std::string(h.name));
    try {
      h.run(bad);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), "layout: buffer 0: lower 3 is not below upper 3");
    }
  }
}

TEST(Heuristics, Registry) {
  std::vector<std::string> names;
  for (const LayoutHeuristic& h : layout_heuristics()) names.emplace_back(h.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"greedy-by-size", "greedy-by-breadth", "greedy-by-conflicts",
                                      "best-fit-by-size", "best-fit-by-duration", "best-fit"}));
  ASSERT_NE(find_layout_heuristic("best-fit"), nullptr);
  EXPECT_EQ(find_layout_heuristic("best-fit")->run, heap_best_fit);
  EXPECT_EQ(find_layout_heuristic("first-fit"), nullptr);
}

// ---- Orders ------------------------------------------------------------------

TEST(Orders, MatchTheirDefinitions) {
  const LayoutProblem complex = testing::tflite_complex();
  using V = std::vector<BufferIndex>;
  EXPECT_EQ(order_by_size(complex), (V{5, 0, 1, 3, 8, 2, 4, 6, 7}));
  // t5 (96): 5 3 2 4; t7 (80): 6 7; t1 (64, before t4): 0 1; t8: 8.
  EXPECT_EQ(order_by_breadth(complex), (V{5, 3, 2, 4, 6, 7, 0, 1, 8}));
  EXPECT_EQ(order_by_conflicts(complex), (V{5, 1, 3, 2, 4, 6, 7, 8, 0}));
  EXPECT_EQ(order_by_size_then_duration(complex), (V{5, 1, 0, 3, 8, 2, 6, 4, 7}));
  EXPECT_EQ(order_by_duration(complex), (V{1, 2, 5, 3, 6, 0, 8, 4, 7}));
  const LayoutProblem empty;
  EXPECT_TRUE(order_by_breadth(empty).empty());
}

// ---- Placement rules ----------------------------------------------------------

// Six buffers placed in index order stack up without gaps (0@0 [0,10),
// 1@10, 2@30, 3@35, 4@39, 5@45, arena 52). During [1,3) only 0 [0,10),
// 2 [30,35) and 4 [39,45) remain: gaps [10,30) (20) and [35,39) (4), top
// 45, and 7 bytes between the top and the arena end. Buffer 6 [1,3) of
// `size` goes last.
LayoutProblem two_gaps(uint64_t size) {
  return problem(
      {{0, 3, 10}, {0, 1, 20}, {0, 3, 5}, {0, 1, 4}, {0, 3, 6}, {0, 1, 7}, {1, 3, size}});
}

struct FitCase {
  uint64_t size;
  Fit fit;
  uint64_t offset;  // of buffer 6
  uint64_t arena;
};

TEST(Placement, RulesChooseTheirGap) {
  const std::vector<FitCase> cases = {
      // 3 bytes: the smallest gap is [35,39); the lowest is [10,30).
      {3, Fit::kBestGap, 35, 52},
      {3, Fit::kBestFit, 35, 52},
      {3, Fit::kFirstFit, 10, 52},
      {3, Fit::kAboveConflicts, 45, 52},
      // 5 bytes: only [10,30) holds it; XLA prefers the 7 bytes above the top.
      {5, Fit::kBestGap, 10, 52},
      {5, Fit::kBestFit, 45, 52},
      {5, Fit::kFirstFit, 10, 52},
      {5, Fit::kAboveConflicts, 45, 52},
      // 8 bytes: the room above the top is too small for XLA too.
      {8, Fit::kBestGap, 10, 52},
      {8, Fit::kBestFit, 10, 52},
      {8, Fit::kFirstFit, 10, 52},
      {8, Fit::kAboveConflicts, 45, 53},
      // 25 bytes: nothing holds it; every rule puts it on top.
      {25, Fit::kBestGap, 45, 70},
      {25, Fit::kBestFit, 45, 70},
      {25, Fit::kFirstFit, 45, 70},
      {25, Fit::kAboveConflicts, 45, 70},
  };
  const std::vector<BufferIndex> order = {0, 1, 2, 3, 4, 5, 6};
  for (const FitCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << "size " << c.size << " fit " << static_cast<int>(c.fit));
    const LayoutProblem p = two_gaps(c.size);
    const Layout layout = place_in_order(p, order, c.fit);
    EXPECT_EQ(layout.offsets, (std::vector<uint64_t>{0, 10, 30, 35, 39, 45, c.offset}));
    EXPECT_EQ(layout.arena, c.arena);
    EXPECT_EQ(check_layout(p, layout), std::nullopt);
  }
}

TEST(Placement, GapsStartAtAlignedEnds) {
  // Alignment 8: 0@0 [0,5) leaves its conflicts' gap starting at 8, not 5.
  const LayoutProblem p = problem({{0, 2, 5}, {0, 1, 16}, {0, 2, 4}, {1, 2, 3}}, 8);
  // 0@0; 1 above 0: @8; 2 above 0, 1 (24): @24; 3 [1,2) meets 0 [0,8 aligned)
  // and 2 [24,28 -> 32): the gap [8,24) holds it, @8 for every gap rule.
  for (const Fit fit : {Fit::kBestGap, Fit::kBestFit, Fit::kFirstFit}) {
    const Layout layout = place_in_order(p, std::vector<BufferIndex>{0, 1, 2, 3}, fit);
    EXPECT_EQ(layout.offsets, (std::vector<uint64_t>{0, 8, 24, 8}));
    EXPECT_EQ(layout.arena, 28u);
  }
  const Layout above =
      place_in_order(p, std::vector<BufferIndex>{0, 1, 2, 3}, Fit::kAboveConflicts);
  EXPECT_EQ(above.offsets, (std::vector<uint64_t>{0, 8, 24, 32}));
  EXPECT_EQ(above.arena, 35u);
}

TEST(Placement, RejectsOrdersThatAreNotPermutations) {
  const LayoutProblem p = problem({{0, 1, 1}, {0, 1, 1}});
  const auto message = [&](std::vector<BufferIndex> order) {
    try {
      place_in_order(p, order, Fit::kBestGap);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({0}), "layout: an order of 1 buffers for 2 buffers");
  EXPECT_EQ(message({1, 1}), "layout: the order repeats or misses buffers (index 1 of 2)");
  EXPECT_EQ(message({0, 2}), "layout: the order repeats or misses buffers (index 2 of 2)");
  EXPECT_THROW(place_in_order(problem({{2, 1, 1}}), std::vector<BufferIndex>{0}, Fit::kBestGap),
               Error);
}

TEST(Placement, PlacerAnswersIncrementally) {
  const LayoutProblem p = two_gaps(3);
  Placer placer(p);
  for (BufferIndex i = 0; i < 6; ++i) placer.place(i, placer.choose(i, Fit::kBestGap));
  EXPECT_EQ(placer.arena(), 52u);
  EXPECT_FALSE(placer.placed(6));
  // Asking does not place; each rule answers from the same state.
  EXPECT_EQ(placer.choose(6, Fit::kFirstFit), 10u);
  EXPECT_EQ(placer.choose(6, Fit::kBestGap), 35u);
  EXPECT_EQ(placer.choose(6, Fit::kAboveConflicts), 45u);
  placer.place(6, 12);  // any offset the caller likes
  EXPECT_TRUE(placer.placed(6));
  EXPECT_EQ(placer.layout().offsets.back(), 12u);
}

}  // namespace
}  // namespace memwall
