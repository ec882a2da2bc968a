// PyTorch's size rules (c10/cuda/CUDACachingAllocator.cpp: round_size,
// get_pool, get_allocation_size, should_split, get_free_block) with exact values.
#include <gtest/gtest.h>

#include "memwall/alloc/rules.h"

namespace memwall::alloc {
namespace {

// round_size(): kMinBlockSize = 512.
TEST(AllocRules, RoundSizeTo512) {
  EXPECT_EQ(round_size(1), 512u);
  EXPECT_EQ(round_size(512), 512u);
  EXPECT_EQ(round_size(513), 1024u);
  EXPECT_EQ(round_size(kMiB), kMiB);
  EXPECT_EQ(round_size(kMiB + 1), kMiB + 512);
  EXPECT_EQ(round_size(uint64_t{1} << 62), uint64_t{1} << 62);  // no wrap at the limit
}

// get_pool(): size <= kSmallSize (1 MiB) is small.
TEST(AllocRules, PoolBoundaryIsOneMiB) {
  EXPECT_EQ(pool_for(round_size(kMiB)), PoolKind::small);
  EXPECT_EQ(pool_for(round_size(kMiB + 1)), PoolKind::large);
}

// get_allocation_size(): kSmallBuffer, kLargeBuffer below kMinLargeAlloc, else kRoundLarge.
TEST(AllocRules, SegmentSizes) {
  EXPECT_EQ(segment_size(round_size(1)), 2 * kMiB);
  EXPECT_EQ(segment_size(round_size(kMiB)), 2 * kMiB);
  EXPECT_EQ(segment_size(round_size(kMiB + 1)), 20 * kMiB);
  EXPECT_EQ(segment_size(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(segment_size(10 * kMiB), 10 * kMiB);
  EXPECT_EQ(segment_size(10 * kMiB + 512), 12 * kMiB);
  EXPECT_EQ(segment_size(100 * kMiB + 1), 102 * kMiB);
}

// should_split().
TEST(AllocRules, SplitRules) {
  // Small: split when >= 512 bytes remain.
  EXPECT_TRUE(should_split(PoolKind::small, 2 * kMiB, 2 * kMiB - 512, kNoSplitLimit));
  EXPECT_FALSE(should_split(PoolKind::small, 1024, 1024, kNoSplitLimit));
  // Large: split only when more than 1 MiB remains.
  EXPECT_FALSE(should_split(PoolKind::large, 20 * kMiB, 19 * kMiB, kNoSplitLimit));
  EXPECT_TRUE(should_split(PoolKind::large, 20 * kMiB, 19 * kMiB - 512, kNoSplitLimit));
  // ... and the request is below max_split_size.
  EXPECT_FALSE(should_split(PoolKind::large, 200 * kMiB, 40 * kMiB, 40 * kMiB));
  EXPECT_TRUE(should_split(PoolKind::large, 200 * kMiB, 40 * kMiB - 512, 40 * kMiB));
  // Expandable segments split large blocks like small ones.
  EXPECT_TRUE(should_split(PoolKind::large, 20 * kMiB, 19 * kMiB, kNoSplitLimit, true));
}

// get_free_block()'s two max_split_size checks.
TEST(AllocRules, OversizeFilter) {
  const uint64_t limit = 40 * kMiB;
  EXPECT_FALSE(
      oversize_filter_accepts(40 * kMiB, 2 * kMiB, limit));  // oversize for a normal request
  EXPECT_TRUE(oversize_filter_accepts(38 * kMiB, 2 * kMiB, limit));
  EXPECT_TRUE(oversize_filter_accepts(59 * kMiB, 40 * kMiB, limit));   // waste < 20 MiB
  EXPECT_FALSE(oversize_filter_accepts(60 * kMiB, 40 * kMiB, limit));  // waste >= 20 MiB
}

}  // namespace
}  // namespace memwall::alloc
