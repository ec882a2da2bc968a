// The replay helper behind `memwall alloc-replay`.
#include <gtest/gtest.h>

#include <vector>

#include "alloc_test_util.h"
#include "memwall/alloc/replay.h"

namespace memwall::alloc {
namespace {

using Kind = ReplayEvent::Kind;

std::vector<ReplayEvent> interleaved() {
  // Five 4 MiB / 2 MiB buffers; the 4 MiB ones die and a 10 MiB one follows.
  return {{Kind::alloc, 0, 4 * kMiB},
          {Kind::alloc, 1, 2 * kMiB},
          {Kind::alloc, 2, 4 * kMiB},
          {Kind::alloc, 3, 2 * kMiB},
          {Kind::alloc, 4, 4 * kMiB},
          {Kind::free, 0},
          {Kind::free, 2},
          {Kind::free, 4},
          {Kind::alloc, 5, 10 * kMiB}};
}

TEST(Replay, StitchingFitsWhereCachingDoesNot) {
  const auto events = interleaved();
  const ReplayResult stitching = replay("stitching", 16 * kMiB, events);
  EXPECT_TRUE(stitching.fits);
  EXPECT_EQ(stitching.stats.peak_reserved_bytes, 16 * kMiB);
  EXPECT_EQ(stitching.stats.peak_allocated_bytes, 16 * kMiB);
  EXPECT_EQ(stitching.stats.stitches, 1u);
  const ReplayResult caching = replay("caching", 16 * kMiB, events);
  EXPECT_FALSE(caching.fits);
  EXPECT_EQ(caching.failed_event, 0u);  // a 4 MiB request needs a 20 MiB segment
  const ReplayResult roomy = replay("caching", 1024 * kMiB, events);
  EXPECT_TRUE(roomy.fits);
  EXPECT_EQ(roomy.stats.peak_reserved_bytes, 30 * kMiB);  // a 20 MiB and a 10 MiB segment
}

TEST(Replay, PlanPolicyUsesEventIdsAsTags) {
  Options options;
  options.arena_bytes = 16 * kMiB;
  options.offsets = {{0, 0}, {1, 4 * kMiB}, {2, 0}, {3, 6 * kMiB}, {4, 8 * kMiB}, {5, 0}};
  auto events = interleaved();
  events[2] = {Kind::alloc, 2, 4 * kMiB};  // overlaps live id 0 at offset 0
  EXPECT_EQ(testing::error_of([&] { replay("plan", 64 * kMiB, events, options); }),
            "plan: request 2 at [0, 4194304) overlaps live request 0 at [0, 4194304)");
  options.offsets[2] = 12 * kMiB;
  options.offsets[4] = 16 * kMiB;  // past the arena
  EXPECT_NE(testing::error_of([&] {
              replay("plan", 64 * kMiB, events, options);
            }).find("ends past the arena"),
            std::string::npos);
}

TEST(Replay, RejectsMalformedSequences) {
  const std::vector<ReplayEvent> twice = {{Kind::alloc, 7, 100}, {Kind::alloc, 7, 100}};
  EXPECT_EQ(testing::error_of([&] { replay("caching", 64 * kMiB, twice); }),
            "replay: event 1: id 7 allocated again while live");
  const std::vector<ReplayEvent> unknown = {{Kind::free, 3}};
  EXPECT_EQ(testing::error_of([&] { replay("caching", 64 * kMiB, unknown); }),
            "replay: event 0: free of id 3 not live");
}

}  // namespace
}  // namespace memwall::alloc
