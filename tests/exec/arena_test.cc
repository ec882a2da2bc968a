// The plan's arena (src/exec/arena.h, Note [Plan offsets at run time]):
// placements at an offset, the lowest free range clear of reserved ones,
// and the free ranges kept as gaps (Note [Arena gaps]). Offsets are worked
// by hand from the placements each case makes.
#include "exec/arena.h"

#include <cstdint>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace memwall::exec {
namespace {

using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;

std::optional<uint64_t> offset(const Arena& arena, std::optional<void*> p) {
  if (!p) return std::nullopt;
  return arena.offset_of(*p);
}

TEST(Arena, PlaceAtTakesOnlyFreeRanges) {
  Arena arena(1000);
  EXPECT_EQ(offset(arena, arena.place_at(100, 100)), 100u);
  EXPECT_FALSE(arena.place_at(150, 10));                  // inside a live range
  EXPECT_FALSE(arena.place_at(50, 51));                   // reaches into it
  EXPECT_FALSE(arena.place_at(900, 101));                 // past the arena's end
  EXPECT_EQ(offset(arena, arena.place_at(50, 50)), 50u);  // ends where it begins
  EXPECT_EQ(offset(arena, arena.place_at(200, 800)), 200u);
  EXPECT_EQ(arena.high_water(), 1000u);
  EXPECT_EQ(arena.overlapping(0, 1000), "[50, 100) [100, 200) [200, 1000)");
}

struct AnywhereCase {
  const char* name;
  Ranges live;      // placed first, in order
  Ranges released;  // then released (offsets of live ones)
  Ranges reserved;
  uint64_t bytes;
  std::optional<uint64_t> expected;
};

TEST(Arena, PlaceAnywhereTakesTheLowestStartClearOfLiveAndReserved) {
  const std::vector<AnywhereCase> cases = {
      {"empty arena", {}, {}, {}, 64, 0},
      {"after the first live range", {{0, 100}}, {}, {}, 64, 100},
      {"the first gap that holds it", {{0, 100}, {150, 50}, {300, 100}}, {}, {}, 80, 200},
      {"a small gap first", {{0, 100}, {150, 50}, {300, 100}}, {}, {}, 50, 100},
      {"past a reserved range", {{0, 100}}, {}, {{100, 40}}, 64, 140},
      {"past two reserved ones in either order", {{0, 100}}, {}, {{180, 20}, {100, 40}}, 64, 200},
      {"reserved fills the gap, next gap", {{0, 100}, {200, 100}}, {}, {{120, 60}}, 64, 300},
      {"a released range merges with both neighbours",
       {{0, 100}, {100, 100}, {200, 100}, {300, 700}},
       {{100, 100}, {200, 100}},
       {},
       200,
       100},
      {"full", {{0, 1000}}, {}, {}, 1, std::nullopt},
      {"no room clear of reserved", {{0, 900}}, {}, {{900, 50}}, 64, std::nullopt},
      {"zero bytes take one", {{0, 10}}, {}, {}, 0, 10},
  };
  for (const AnywhereCase& c : cases) {
    SCOPED_TRACE(c.name);
    Arena arena(1000);
    for (const auto& [o, b] : c.live) ASSERT_TRUE(arena.place_at(o, b));
    for (const auto& [o, b] : c.released) {
      ASSERT_EQ(arena.release(const_cast<void*>(arena.address(o))), b);
    }
    EXPECT_EQ(offset(arena, arena.place_anywhere(c.bytes, c.reserved)), c.expected);
  }
}

// The gaps against a byte map of the same placements: every placement the
// map says is free succeeds, every one it says is taken fails, and
// place_anywhere finds the lowest clear start the map has.
TEST(Arena, GapsAgreeWithAByteMapOverRandomPlacements) {
  constexpr uint64_t kSize = 512;
  Arena arena(kSize);
  std::vector<bool> used(kSize, false);
  std::vector<std::pair<uint64_t, uint64_t>> live;
  std::mt19937 rng(7);
  const auto is_free = [&](uint64_t o, uint64_t b) {
    if (o + b > kSize) return false;
    for (uint64_t i = o; i < o + b; ++i) {
      if (used[i]) return false;
    }
    return true;
  };
  const auto mark = [&](uint64_t o, uint64_t b, bool v) {
    for (uint64_t i = o; i < o + b; ++i) used[i] = v;
  };
  for (int step = 0; step < 4000; ++step) {
    const uint64_t bytes = 1 + rng() % 48;
    const int what = static_cast<int>(rng() % 3);
    if (what == 0 && !live.empty()) {
      const size_t k = rng() % live.size();
      ASSERT_EQ(arena.release(const_cast<void*>(arena.address(live[k].first))), live[k].second);
      mark(live[k].first, live[k].second, false);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    } else if (what == 1) {
      const uint64_t at = rng() % kSize;
      const bool expect = is_free(at, bytes);
      ASSERT_EQ(arena.place_at(at, bytes).has_value(), expect) << "step " << step;
      if (expect) {
        mark(at, bytes, true);
        live.emplace_back(at, bytes);
      }
    } else {
      const Ranges reserved = {{rng() % kSize, 1 + rng() % 32}};
      std::optional<uint64_t> lowest;
      for (uint64_t s = 0; s + bytes <= kSize && !lowest; ++s) {
        const auto& [r, rb] = reserved[0];
        if (is_free(s, bytes) && !(s < r + rb && r < s + bytes)) lowest = s;
      }
      ASSERT_EQ(offset(arena, arena.place_anywhere(bytes, reserved)), lowest) << "step " << step;
      if (lowest) {
        mark(*lowest, bytes, true);
        live.emplace_back(*lowest, bytes);
      }
    }
  }
}

}  // namespace
}  // namespace memwall::exec
