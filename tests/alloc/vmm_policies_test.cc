// The virtual-memory policies: "expandable", "stitching" (on real host
// memory, so stitched buffers are written and read) and "plan".
#include <gtest/gtest.h>

#include <cstring>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "alloc_test_util.h"

namespace memwall::alloc {
namespace {

using testing::address;
using testing::error_of;
using testing::host_rig;
using testing::kGranule;
using testing::sim_rig;

TEST(Expandable, GrowsOneRangeByMappingChunksAtItsEnd) {
  auto a = sim_rig("expandable", 64 * kMiB);
  const Allocation x = a->allocate(3 * kMiB);
  EXPECT_EQ(a->stats().reserved_bytes, 4 * kMiB);
  // The 1 MiB free tail plus one more chunk: contiguous with x.
  const Allocation y = a->allocate(3 * kMiB);
  EXPECT_EQ(address(y), address(x) + 3 * kMiB);
  Stats s = a->stats();
  EXPECT_EQ(s.reserved_bytes, 6 * kMiB);
  EXPECT_EQ(s.segments_created, 1u);
  EXPECT_EQ(s.maps, 3u);
  a->audit();
  // A free tail's whole chunks go back on empty_cache.
  a->free(y.ptr);
  a->empty_cache();
  EXPECT_EQ(a->stats().reserved_bytes, 4 * kMiB);
  a->audit();
  a->free(x.ptr);
  a->empty_cache();
  EXPECT_EQ(a->stats().reserved_bytes, 0u);
  a->audit();
}

TEST(Expandable, StreamsAndPoolsGrowSeparateRanges) {
  auto a = sim_rig("expandable", 64 * kMiB);
  a->allocate(3 * kMiB, 0);
  a->allocate(3 * kMiB, 1);
  a->allocate(1000, 0);
  EXPECT_EQ(a->stats().segments_created, 3u);
  a->audit();
}

TEST(Expandable, OutOfMemoryTrimsOtherTailsAndRetries) {
  auto a = sim_rig("expandable", 8 * kMiB);
  a->free(a->allocate(6 * kMiB, 1).ptr);  // 6 MiB cached on stream 1
  const Allocation x = a->allocate(4 * kMiB, 0);
  ASSERT_TRUE(x);
  EXPECT_EQ(a->stats().reserved_bytes, 4 * kMiB);
  EXPECT_EQ(a->stats().cache_flushes, 1u);
  a->audit();
}

// Free holes between live blocks are useless to a caching allocator; the
// stitching policy maps their chunks side by side instead of growing.
TEST(Stitching, BuildsABufferFromFreeHolesInsteadOfGrowing) {
  auto a = host_rig("stitching", 16 * kMiB);
  std::vector<Allocation> blocks;
  for (uint64_t bytes : {4 * kMiB, 2 * kMiB, 4 * kMiB, 2 * kMiB, 4 * kMiB}) {
    blocks.push_back(a->allocate(bytes));
    ASSERT_TRUE(blocks.back());
    std::memset(blocks.back().ptr, static_cast<int>(blocks.size()), bytes);
  }
  EXPECT_EQ(a->stats().reserved_bytes, 16 * kMiB);  // the device is full
  a->free(blocks[0].ptr);
  a->free(blocks[2].ptr);
  a->free(blocks[4].ptr);
  const Allocation stitched = a->allocate(10 * kMiB);
  ASSERT_TRUE(stitched);
  Stats s = a->stats();
  EXPECT_EQ(s.stitches, 1u);
  EXPECT_EQ(s.reserved_bytes, 16 * kMiB);
  EXPECT_EQ(s.chunks_created, 8u);  // no new chunk
  EXPECT_EQ(s.oom_events, 0u);
  a->audit();
  // The buffer extends the range's free tail (block 4's place) with the
  // chunks of blocks 0 and 2, mapped after it.
  EXPECT_EQ(address(stitched), address(blocks[4]));
  // The whole buffer is usable memory, and the live neighbours kept theirs.
  std::memset(stitched.ptr, 0x77, 10 * kMiB);
  const auto* bytes = static_cast<const unsigned char*>(stitched.ptr);
  EXPECT_EQ(bytes[0], 0x77);
  EXPECT_EQ(bytes[10 * kMiB - 1], 0x77);
  EXPECT_EQ(static_cast<const unsigned char*>(blocks[1].ptr)[2 * kMiB - 1], 2);
  EXPECT_EQ(static_cast<const unsigned char*>(blocks[3].ptr)[0], 4);
  // One range (reserved at twice the capacity). Blocks 0 and 2 are still
  // free blocks at their places, but block 0's chunks and the last of block
  // 2's are holes in them now.
  const auto snapshot = nlohmann::json::parse(a->snapshot_json());
  ASSERT_EQ(snapshot["segments"].size(), 1u);
  const auto& segment = snapshot["segments"][0];
  EXPECT_EQ(segment["virtual_bytes"], 32 * kMiB);
  EXPECT_EQ(segment["mapped_bytes"], 16 * kMiB);
  const uintptr_t base = segment["address"];
  std::vector<std::tuple<uint64_t, uint64_t, bool>> layout;
  for (const auto& block : segment["blocks"]) {
    layout.emplace_back(uint64_t{block["address"]} - base, block["bytes"], block["allocated"]);
  }
  const std::vector<std::tuple<uint64_t, uint64_t, bool>> expected = {
      {0, 4 * kMiB, false},        {4 * kMiB, 2 * kMiB, true},   {6 * kMiB, 4 * kMiB, false},
      {10 * kMiB, 2 * kMiB, true}, {12 * kMiB, 10 * kMiB, true},
  };
  EXPECT_EQ(layout, expected);
  EXPECT_EQ(s.cached_bytes, 2 * kMiB);  // one chunk is still mapped in block 2
  // Best fit puts 2 MiB at the start of block 0's place, and that chunk
  // moves there: still no new chunk.
  const Allocation rest = a->allocate(2 * kMiB);
  EXPECT_EQ(address(rest), base);
  std::memset(rest.ptr, 0x55, 2 * kMiB);
  s = a->stats();
  EXPECT_EQ(s.reserved_bytes, 16 * kMiB);
  EXPECT_EQ(s.stitches, 2u);
  EXPECT_EQ(s.cached_bytes, 0u);
  a->audit();
}

TEST(Stitching, CachingRunsOutOfMemoryOnTheSameSequence) {
  auto a = sim_rig("caching", 16 * kMiB);
  std::vector<Allocation> blocks;
  for (uint64_t bytes : {4 * kMiB, 2 * kMiB}) blocks.push_back(a->allocate(bytes));
  // 4 MiB and 2 MiB requests share one 20 MiB segment, over the capacity.
  EXPECT_FALSE(blocks[0]);
}

TEST(Stitching, BlocksKeep512ByteRoundingAndStitchOnlyWholeChunks) {
  auto a = sim_rig("stitching", 64 * kMiB);
  // 1 MiB + 512 opens the large range with one chunk; 5 MiB extends its
  // free tail (1 MiB - 512) by three chunks and leaves 2 MiB - 512 free.
  const Allocation x = a->allocate(kMiB + 1);
  EXPECT_EQ(x.block_bytes, kMiB + 512);
  const Allocation big = a->allocate(5 * kMiB);
  EXPECT_EQ(big.block_bytes, 5 * kMiB);
  EXPECT_EQ(address(big), address(x) + kMiB + 512);
  EXPECT_EQ(a->allocate(1000).block_bytes, 1024u);  // a small range of its own
  Stats s = a->stats();
  EXPECT_EQ(s.reserved_bytes, 10 * kMiB);  // 8 large + 2 small
  EXPECT_EQ(s.segments_created, 2u);
  // Freed, x holds no whole chunk (it shares its chunk with `big`), so a
  // 3 MiB request extends the tail with one new chunk and stitches nothing.
  a->free(x.ptr);
  const Allocation y = a->allocate(3 * kMiB);
  s = a->stats();
  EXPECT_EQ(y.block_bytes, 3 * kMiB);
  EXPECT_EQ(address(y), address(big) + 5 * kMiB);
  EXPECT_EQ(s.stitches, 0u);
  EXPECT_EQ(s.reserved_bytes, 12 * kMiB);
  // Freeing `big` makes [0, 6 MiB + 512) free: three whole chunks, which an
  // 8 MiB request takes to the end; one chunk is new. The partial chunk
  // beside y stays.
  a->free(big.ptr);
  const Allocation z = a->allocate(8 * kMiB);
  s = a->stats();
  EXPECT_EQ(address(z), address(y) + 3 * kMiB);
  EXPECT_EQ(s.stitches, 1u);
  EXPECT_EQ(s.reserved_bytes, 14 * kMiB);
  EXPECT_EQ(s.chunks_created, 7u);
  // Free: 512 B beside y, the small range's 2 MiB - 1 KiB, the tail's 1 MiB - 512 B.
  EXPECT_EQ(s.cached_bytes, 3 * kMiB - 1024);
  a->audit();
}

TEST(Stitching, TopsUpWithNewChunksAndReleasesFreeChunksOnEmptyCache) {
  auto a = sim_rig("stitching", 64 * kMiB);
  const Allocation x = a->allocate(4 * kMiB);
  const Allocation keep = a->allocate(2 * kMiB);
  a->free(x.ptr);
  const Allocation y = a->allocate(8 * kMiB);  // 4 MiB of x's chunks + 4 MiB new
  ASSERT_TRUE(y);
  EXPECT_EQ(a->stats().stitches, 1u);
  EXPECT_EQ(a->stats().reserved_bytes, 10 * kMiB);
  a->free(y.ptr);
  a->empty_cache();
  EXPECT_EQ(a->stats().reserved_bytes, 2 * kMiB);
  a->free(keep.ptr);
  a->empty_cache();
  EXPECT_EQ(a->stats().reserved_bytes, 0u);
  EXPECT_EQ(a->device().chunks_in_use(), 0u);
  a->audit();
}

// Note [Growable range size]: on a device of 2^62 bytes (what alloc-replay
// re-runs a trace that does not fit on) a stitching range of twice the
// capacity cannot be reserved in a 64-bit address space, let alone one per
// pool; every growable range is at most 2^62 bytes.
TEST(Stitching, RangesOfADeviceOf2To62BytesFitTheAddressSpace) {
  for (const char* policy : {"expandable", "stitching"}) {
    auto a = sim_rig(policy, kMaxRequestBytes);
    const Allocation small = a->allocate(1000);
    const Allocation large = a->allocate(3 * kMiB);
    ASSERT_TRUE(small) << policy;
    ASSERT_TRUE(large) << policy;
    const auto snapshot = nlohmann::json::parse(a->snapshot_json());
    ASSERT_EQ(snapshot["segments"].size(), 2u) << policy;
    for (const auto& segment : snapshot["segments"]) {
      EXPECT_EQ(segment["virtual_bytes"], kMaxRequestBytes) << policy;
    }
    a->audit();
  }
}

Options plan_options() {
  Options options;
  options.arena_bytes = 10 * kMiB;
  options.offsets = {{0, 0}, {1, 4 * kMiB}, {2, 2 * kMiB}, {3, 9 * kMiB}};
  return options;
}

TEST(Plan, ReturnsTheArenaBasePlusTheOffset) {
  auto a = host_rig("plan", 64 * kMiB, plan_options());
  const Allocation x = a->allocate(4 * kMiB, 0, /*tag=*/0);
  const Allocation y = a->allocate(5 * kMiB, 0, 1);
  EXPECT_EQ(address(y), address(x) + 4 * kMiB);
  EXPECT_EQ(y.block_bytes, 5 * kMiB);
  std::memset(x.ptr, 1, 4 * kMiB);
  std::memset(y.ptr, 2, 5 * kMiB);
  Stats s = a->stats();
  EXPECT_EQ(s.reserved_bytes, 10 * kMiB);
  EXPECT_EQ(s.allocated_bytes, 9 * kMiB);
  a->free(x.ptr);
  const Allocation z = a->allocate(2 * kMiB, 0, 2);  // reuses x's bytes
  EXPECT_EQ(address(z), address(x) + 2 * kMiB);
  a->audit();
}

TEST(Plan, RejectsOverlapsMissingTagsAndOverruns) {
  auto a = sim_rig("plan", 64 * kMiB, plan_options());
  a->allocate(4 * kMiB, 0, 0);
  EXPECT_EQ(error_of([&] { a->allocate(3 * kMiB, 0, 2); }),
            "plan: request 2 at [2097152, 5242880) overlaps live request 0 at [0, 4194304)");
  EXPECT_EQ(error_of([&] { a->allocate(512, 0, 7); }), "plan: request 7 has no offset in the plan");
  EXPECT_EQ(error_of([&] { a->allocate(512); }),
            "plan: allocate needs the request's tag (its id in the plan)");
  EXPECT_EQ(error_of([&] { a->allocate(2 * kMiB, 0, 3); }),
            "plan: request 3 of 2097152 bytes at offset 9437184 ends past the arena of 10485760 "
            "bytes");
  EXPECT_EQ(a->stats().live_allocations, 1u);
  a->audit();
}

TEST(Plan, ArenaLargerThanTheDeviceIsOutOfMemory) {
  auto a = sim_rig("plan", 8 * kMiB, plan_options());
  const Allocation x = a->allocate(512, 0, 0);
  EXPECT_TRUE(x.out_of_memory);
  EXPECT_EQ(a->stats().reserved_bytes, 0u);
  EXPECT_EQ(error_of([] {
              auto device = make_sim_device(kGranule);
              make_allocator("plan", *device, {});
            }),
            "plan: Options::arena_bytes must be positive");
}

}  // namespace
}  // namespace memwall::alloc
