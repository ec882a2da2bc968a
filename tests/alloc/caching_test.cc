// The "caching" policy against PyTorch's CUDACachingAllocator rules, with
// exact segment and block sizes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "alloc_test_util.h"

namespace memwall::alloc {
namespace {

using testing::address;
using testing::kGranule;
using testing::sim_rig;

constexpr uint64_t kCachingCapacity = uint64_t{1} << 30;

TEST(Caching, OneByteTakes512InATwoMiBSmallSegment) {
  auto a = sim_rig("caching", kCachingCapacity);
  const Allocation x = a->allocate(1);
  ASSERT_TRUE(x);
  EXPECT_EQ(x.block_bytes, 512u);
  const Stats s = a->stats();
  EXPECT_EQ(s.allocated_bytes, 512u);
  EXPECT_EQ(s.requested_bytes, 1u);
  EXPECT_EQ(s.reserved_bytes, 2 * kMiB);
  EXPECT_EQ(s.cached_bytes, 2 * kMiB - 512);
  EXPECT_EQ(s.segments_created, 1u);
  EXPECT_EQ(s.chunks_created, 1u);
  a->audit();
}

TEST(Caching, OneMiBIsSmallOneMiBPlusOneIsLarge) {
  auto a = sim_rig("caching", kCachingCapacity);
  EXPECT_EQ(a->allocate(kMiB).block_bytes, kMiB);
  EXPECT_EQ(a->stats().reserved_bytes, 2 * kMiB);  // a small segment
  // 1 MiB + 1 rounds to 1 MiB + 512 in a 20 MiB large segment (remaining
  // 19 MiB - 512 > 1 MiB, so the segment is split).
  const Allocation large = a->allocate(kMiB + 1);
  EXPECT_EQ(large.block_bytes, kMiB + 512);
  EXPECT_EQ(a->stats().reserved_bytes, 22 * kMiB);
  EXPECT_EQ(a->stats().segments_created, 2u);
  a->audit();
}

TEST(Caching, SmallRequestsPackIntoOneSegment) {
  auto a = sim_rig("caching", kCachingCapacity);
  const Allocation x = a->allocate(1000);
  const Allocation y = a->allocate(1000);
  EXPECT_EQ(address(y), address(x) + 1024);
  EXPECT_EQ(a->stats().segments_created, 1u);
}

TEST(Caching, FreedBlockIsReusedWithoutTheDevice) {
  auto a = sim_rig("caching", kCachingCapacity);
  const Allocation x = a->allocate(3 * kMiB);
  a->free(x.ptr);
  const Stats before = a->stats();
  const Allocation y = a->allocate(3 * kMiB);
  EXPECT_EQ(y.ptr, x.ptr);
  EXPECT_EQ(a->stats().chunks_created, before.chunks_created);
  EXPECT_EQ(a->stats().maps, before.maps);
}

TEST(Caching, BestFitBySizeThenAddress) {
  auto a = sim_rig("caching", kCachingCapacity);
  const Allocation small_hole = a->allocate(4096);
  const Allocation keep1 = a->allocate(512);
  const Allocation big_hole = a->allocate(8192);
  const Allocation keep2 = a->allocate(512);
  a->free(big_hole.ptr);
  a->free(small_hole.ptr);
  // The 4 KiB hole fits exactly; the 8 KiB hole is kept for the 8 KiB request.
  EXPECT_EQ(a->allocate(4096).ptr, small_hole.ptr);
  EXPECT_EQ(a->allocate(8192).ptr, big_hole.ptr);
  a->free(keep1.ptr);
  a->free(keep2.ptr);
  a->audit();
}

TEST(Caching, LargeBlockSplitsOnlyWhenMoreThanOneMiBRemains) {
  auto a = sim_rig("caching", kCachingCapacity);
  EXPECT_EQ(a->allocate(19 * kMiB).block_bytes, 20 * kMiB);              // 1 MiB left: not split
  EXPECT_EQ(a->allocate(19 * kMiB - 512).block_bytes, 19 * kMiB - 512);  // split
  a->audit();
}

TEST(Caching, FreeMergesNeighbours) {
  auto a = sim_rig("caching", kCachingCapacity);
  const Allocation x = a->allocate(1000);
  const Allocation y = a->allocate(1000);
  const Allocation z = a->allocate(1000);
  a->free(x.ptr);
  a->free(z.ptr);
  a->free(y.ptr);
  const auto snapshot = nlohmann::json::parse(a->snapshot_json());
  ASSERT_EQ(snapshot["segments"].size(), 1u);
  const auto& blocks = snapshot["segments"][0]["blocks"];
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0]["bytes"], 2 * kMiB);
  EXPECT_EQ(blocks[0]["allocated"], false);
  a->audit();
}

TEST(Caching, StreamsHaveTheirOwnBlocks) {
  auto a = sim_rig("caching", kCachingCapacity);
  const Allocation x = a->allocate(1000, /*stream=*/0);
  a->free(x.ptr);
  const Allocation y = a->allocate(1000, /*stream=*/1);
  EXPECT_NE(y.ptr, x.ptr);
  EXPECT_EQ(a->stats().segments_created, 2u);
  EXPECT_EQ(a->allocate(1000, 0).ptr, x.ptr);
}

TEST(Caching, MaxSplitSizeKeepsOversizeBlocksWhole) {
  Options options;
  options.max_split_size = 40 * kMiB;
  auto a = sim_rig("caching", kCachingCapacity, options);
  const Allocation big = a->allocate(100 * kMiB);
  a->free(big.ptr);
  // A normal request never takes an oversize block: a new 20 MiB segment.
  const Allocation normal = a->allocate(2 * kMiB);
  EXPECT_NE(normal.ptr, big.ptr);
  EXPECT_EQ(a->stats().reserved_bytes, 120 * kMiB);
  // An oversize request takes it whole if it wastes less than 20 MiB...
  const Allocation close = a->allocate(90 * kMiB);
  EXPECT_EQ(close.ptr, big.ptr);
  EXPECT_EQ(close.block_bytes, 100 * kMiB);
  a->free(close.ptr);
  // ...and not if it would waste 20 MiB or more.
  const Allocation far = a->allocate(80 * kMiB);
  EXPECT_NE(far.ptr, big.ptr);
  a->audit();
}

TEST(Caching, RejectsMaxSplitSizeBelowTwentyMiB) {
  Options options;
  options.max_split_size = kMiB;
  EXPECT_EQ(testing::error_of([&] { sim_rig("caching", kCachingCapacity, options); }),
            "max_split_size of 1048576 bytes is below PyTorch's minimum of 20 MiB");
}

TEST(Caching, OutOfMemoryReleasesCachedSegmentsAndRetries) {
  auto a = sim_rig("caching", 16 * kMiB);
  a->free(a->allocate(1000).ptr);               // a cached 2 MiB small segment
  const Allocation x = a->allocate(15 * kMiB);  // needs a 16 MiB segment
  ASSERT_TRUE(x);
  Stats s = a->stats();
  EXPECT_EQ(s.cache_flushes, 1u);
  EXPECT_EQ(s.segments_released, 1u);
  EXPECT_EQ(s.reserved_bytes, 16 * kMiB);
  EXPECT_EQ(s.oom_events, 0u);
  // Nothing cached is left to release: a real out-of-memory result.
  const Allocation y = a->allocate(1000);
  EXPECT_FALSE(y);
  EXPECT_TRUE(y.out_of_memory);
  s = a->stats();
  EXPECT_EQ(s.oom_events, 1u);
  EXPECT_EQ(s.allocated_bytes, 16 * kMiB);
  a->audit();
}

TEST(Caching, EmptyCacheReleasesOnlyWholeFreeSegments) {
  auto a = sim_rig("caching", kCachingCapacity);
  const Allocation x = a->allocate(1000);
  const Allocation y = a->allocate(1000);
  a->free(a->allocate(12 * kMiB).ptr);
  a->free(x.ptr);
  a->empty_cache();
  // The small segment still holds y; the 12 MiB segment went.
  EXPECT_EQ(a->stats().reserved_bytes, 2 * kMiB);
  a->free(y.ptr);
  a->empty_cache();
  EXPECT_EQ(a->stats().reserved_bytes, 0u);
  EXPECT_EQ(a->device().chunks_in_use(), 0u);
  a->audit();
}

TEST(Caching, FragmentationAtThePeak) {
  auto a = sim_rig("caching", kCachingCapacity);
  const Allocation x = a->allocate(kMiB + 1);  // 1 MiB + 512 of a 20 MiB segment
  const Stats s = a->stats();
  EXPECT_EQ(s.peak_reserved_bytes, 20 * kMiB);
  EXPECT_EQ(s.allocated_at_peak_reserved, kMiB + 512);
  EXPECT_DOUBLE_EQ(s.fragmentation(), 1.0 - double(kMiB + 512) / double(20 * kMiB));
  a->free(x.ptr);
}

TEST(Caching, SnapshotDescribesSegmentsAndBlocks) {
  auto a = sim_rig("caching", kCachingCapacity);
  const Allocation x = a->allocate(1000, 3);
  const auto snapshot = nlohmann::json::parse(a->snapshot_json());
  EXPECT_EQ(snapshot["policy"], "caching");
  EXPECT_EQ(snapshot["device"], "sim");
  EXPECT_EQ(snapshot["granularity"], kGranule);
  EXPECT_EQ(snapshot["stats"]["allocated_bytes"], 1024u);
  EXPECT_EQ(snapshot["stats"]["reserved_bytes"], 2 * kMiB);
  const auto& segment = snapshot["segments"][0];
  EXPECT_EQ(segment["stream"], 3);
  EXPECT_EQ(segment["pool"], "small");
  EXPECT_EQ(segment["mapped_bytes"], 2 * kMiB);
  ASSERT_EQ(segment["blocks"].size(), 2u);
  EXPECT_EQ(segment["blocks"][0]["address"], address(x));
  EXPECT_EQ(segment["blocks"][0]["requested"], 1000);
  EXPECT_EQ(segment["blocks"][0]["allocated"], true);
  EXPECT_EQ(segment["blocks"][1]["bytes"], 2 * kMiB - 1024);
}

TEST(Policies, NamesAndUnknownPolicy) {
  ASSERT_EQ(policy_names().size(), 4u);
  EXPECT_EQ(policy_names()[0], "caching");
  EXPECT_EQ(policy_names()[3], "plan");
  auto device = make_sim_device(kCachingCapacity);
  EXPECT_EQ(testing::error_of([&] { make_allocator("buddy", *device); }),
            "unknown allocator policy \"buddy\" (known: caching, expandable, stitching, plan)");
}

}  // namespace
}  // namespace memwall::alloc
