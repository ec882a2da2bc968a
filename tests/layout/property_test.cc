// Properties of every heuristic: on random problems, on the real inputs in
// ../shared/data/layout (skipped when absent) and on zoo models, every layout
// passes check_layout and its arena is at least the lower bounds. The Placer
// agrees with a brute-force reading of each placement rule.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "memwall/layout/csv.h"
#include "memwall/layout/from_graph.h"
#include "memwall/layout/heuristics.h"
#include "memwall/layout/placement.h"
#include "memwall/layout/problem.h"
#include "memwall/models/zoo.h"
#include "test_util.h"
#include "zoo_models.h"

namespace memwall {
namespace {

LayoutProblem random_property_problem(std::mt19937& rng) {
  LayoutProblem p;
  const int n = std::uniform_int_distribution<int>(0, 60)(rng);
  const int horizon = std::uniform_int_distribution<int>(1, 40)(rng);
  const uint64_t alignments[] = {1, 1, 2, 8, 64};
  p.alignment = alignments[std::uniform_int_distribution<int>(0, 4)(rng)];
  std::uniform_int_distribution<int> time(0, horizon);
  for (int i = 0; i < n; ++i) {
    int a = time(rng), b = time(rng);
    if (a == b) ++b;
    if (a > b) std::swap(a, b);
    // Mostly small sizes, some large, some equal, to exercise ties.
    const uint64_t size = std::bernoulli_distribution(0.2)(rng)
                              ? 64
                              : std::uniform_int_distribution<uint64_t>(1, 1000)(rng);
    p.buffers.push_back({.id = 3 * i + 1, .lower = a, .upper = b, .size = size});
  }
  return p;
}

void expect_valid_and_bounded(const LayoutProblem& p, const std::string& label) {
  const uint64_t bound = arena_lower_bound(p);
  EXPECT_GE(bound, live_lower_bound(p)) << label;
  for (const LayoutHeuristic& h : layout_heuristics()) {
    const Layout layout = h.run(p);
    EXPECT_EQ(check_layout(p, layout), std::nullopt) << label << " " << h.name;
    EXPECT_GE(layout.arena, bound) << label << " " << h.name;
  }
}

TEST(Property, RandomProblems) {
  std::mt19937 rng(20240501);
  for (int round = 0; round < 400; ++round) {
    expect_valid_and_bounded(random_property_problem(rng), "round " + std::to_string(round));
  }
}

// The placement rules read literally: list the placed buffers that meet i
// in time, sort them by offset, walk the gaps.
uint64_t brute_force_choice(const LayoutProblem& p, const std::vector<uint64_t>& offsets,
                            const std::vector<bool>& placed, uint64_t arena, size_t i, Fit fit) {
  struct Chunk {
    uint64_t start, end;
  };
  std::vector<Chunk> chunks;
  const auto round_up = [&](uint64_t x) {
    return (x + p.alignment - 1) / p.alignment * p.alignment;
  };
  for (size_t j = 0; j < p.buffers.size(); ++j) {
    if (!placed[j] || p.buffers[j].upper <= p.buffers[i].lower ||
        p.buffers[i].upper <= p.buffers[j].lower) {
      continue;
    }
    chunks.push_back({offsets[j], round_up(offsets[j] + p.buffers[j].size)});
  }
  std::sort(chunks.begin(), chunks.end(),
            [](const Chunk& a, const Chunk& b) { return a.start < b.start; });
  uint64_t top = 0;
  std::vector<Chunk> gaps;
  for (const Chunk& c : chunks) {
    if (c.start > top) gaps.push_back({top, c.start});
    top = std::max(top, c.end);
  }
  if (fit == Fit::kBestFit && arena > top) gaps.push_back({top, arena});
  const uint64_t size = p.buffers[i].size;
  if (fit == Fit::kAboveConflicts) return top;
  const Chunk* chosen = nullptr;
  for (const Chunk& g : gaps) {
    if (g.end - g.start < size) continue;
    if (fit == Fit::kFirstFit) return g.start;
    if (!chosen || g.end - g.start < chosen->end - chosen->start) chosen = &g;
  }
  return chosen ? chosen->start : top;
}

TEST(Property, PlacerMatchesBruteForce) {
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    const LayoutProblem p = random_property_problem(rng);
    std::vector<BufferIndex> order(p.buffers.size());
    for (BufferIndex i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (const Fit fit : {Fit::kBestGap, Fit::kBestFit, Fit::kFirstFit, Fit::kAboveConflicts}) {
      std::vector<uint64_t> offsets(p.buffers.size(), 0);
      std::vector<bool> placed(p.buffers.size(), false);
      uint64_t arena = 0;
      for (const BufferIndex i : order) {
        offsets[i] = brute_force_choice(p, offsets, placed, arena, i, fit);
        placed[i] = true;
        arena = std::max(arena, offsets[i] + p.buffers[i].size);
      }
      const Layout layout = place_in_order(p, order, fit);
      ASSERT_EQ(layout.offsets, offsets) << "round " << round << " fit " << static_cast<int>(fit);
      EXPECT_EQ(layout.arena, arena);
    }
  }
}

TEST(Property, SharedDataInputs) {
  const std::filesystem::path dir =
      std::filesystem::path(MEMWALL_SOURCE_DIR) / ".." / "shared" / "data" / "layout";
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << dir << " is absent";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".csv") continue;
    ++files;
    const LayoutCsv csv = read_layout_csv(entry.path().string());
    expect_valid_and_bounded(csv.problem, entry.path().filename().string());
  }
  EXPECT_GT(files, 0);
}

TEST(Property, ZooModels) {
  for (const ModelInfo& info : model_zoo()) {
    if (!in_sanitizer_sweep(info.name)) continue;  // Note [Zoo sweeps under sanitizers]
    LayoutProblem p = layout_problem(small_zoo_model(info));
    expect_valid_and_bounded(p, info.name);
    p.alignment = 512;  // the CUDA caching allocator's rounding
    expect_valid_and_bounded(p, info.name + " aligned");
  }
}

}  // namespace
}  // namespace memwall
