// The NVMe swap space a plan needs (Note [NVMe reservation] in
// src/plan/nvme_reservation.cc): the buffers it ever places or swaps out
// to NVMe, each in whole blocks, in the largest block whose rounding adds
// at most 1/16. Issue 45: a run reserved every buffer of the graph plus a
// 1 MiB block each, 456 MB for a plan of 1.85 MiB.
#include "memwall/plan/nvme_reservation.h"

#include <gtest/gtest.h>

#include "memwall/base/error.h"
#include "small_graph.h"

namespace memwall {
namespace {

constexpr uint64_t kKiB = 1024, kMiB = kKiB * kKiB;

// w and w.m start on NVMe, h0.out is swapped out to it and back, y to the
// host only.
Plan nvme_plan() {
  Plan plan;
  plan.graph = "small";
  plan.hardware = "test";
  plan.budget = 1 << 30;
  plan.placement = {{0, Tier::kNvme}, {2, Tier::kNvme}, {1, Tier::kHost}};
  plan.steps = {Step::compute(0),
                Step::swap_out(5, Tier::kNvme),
                Step::swap_in(5),
                Step::compute(1),
                Step::swap_out(4, Tier::kHost),
                Step::swap_in(4),
                Step::compute(2),
                Step::free(4),
                Step::free(5)};
  return plan;
}

Graph sized(uint64_t w, uint64_t m, uint64_t h0) {
  Graph g = testing::small_graph();
  g.buffers[0].bytes = w;
  g.buffers[2].bytes = m;
  g.buffers[5].bytes = h0;
  return g;
}

TEST(NvmeReservation, EachBufferOnNvmeOnceInWholeBlocks) {
  const Graph g = sized(5000, 8192, 1);
  const Plan plan = nvme_plan();
  validate_plan(plan, g);
  EXPECT_EQ(nvme_buffers(g, plan), (std::vector<uint8_t>{1, 0, 1, 0, 0, 1}));
  const NvmeReservation r = nvme_reservation(g, plan, 4096, 4096);
  EXPECT_EQ(r.buffers, 3u);
  EXPECT_EQ(r.bytes, 5000u + 8192u + 1u);
  EXPECT_EQ(r.blocks, 2u + 2u + 1u);
  EXPECT_EQ(r.block_bytes, 4096u);
  EXPECT_EQ(r.reserved_bytes(), 5u * 4096u);
}

TEST(NvmeReservation, HalvesTheBlockWhileRoundingAddsMoreThanASixteenth) {
  // 6 MiB + 100 KiB: at 1 MiB the last buffer wastes 924 KiB, at 512 KiB
  // 412 KiB, both over 1/16 of the bytes (390 KiB); at 256 KiB 156 KiB.
  const Graph g = sized(3 * kMiB, 3 * kMiB, 100 * kKiB);
  const NvmeReservation r = nvme_reservation(g, nvme_plan(), 4096, kMiB);
  EXPECT_EQ(r.block_bytes, 256 * kKiB);
  EXPECT_EQ(r.blocks, 12u + 12u + 1u);
  EXPECT_LE(r.reserved_bytes() - r.bytes, r.bytes / 16);
  // Large buffers keep the engine's largest block.
  const NvmeReservation large =
      nvme_reservation(sized(64 * kMiB, 64 * kMiB, 1), nvme_plan(), 4096, kMiB);
  EXPECT_EQ(large.block_bytes, kMiB);
  EXPECT_EQ(large.reserved_bytes(), 129 * kMiB);
  // Tiny ones go down to the smallest, and no further.
  const NvmeReservation tiny = nvme_reservation(sized(10, 10, 10), nvme_plan(), 4096, kMiB);
  EXPECT_EQ(tiny.block_bytes, 4096u);
  EXPECT_EQ(tiny.reserved_bytes(), 3u * 4096u);
}

TEST(NvmeReservation, EmptyBuffersAndPlansWithoutNvmeNeedNoBlock) {
  const NvmeReservation empty = nvme_reservation(sized(0, 4096, 0), nvme_plan(), 4096, 4096);
  EXPECT_EQ(empty.buffers, 3u);
  EXPECT_EQ(empty.blocks, 1u);
  Plan on_device = nvme_plan();
  on_device.placement.clear();
  on_device.steps = {Step::compute(0), Step::compute(1), Step::compute(2), Step::compute(3)};
  const NvmeReservation none = nvme_reservation(testing::small_graph(), on_device, 4096, kMiB);
  EXPECT_EQ(none.buffers, 0u);
  EXPECT_EQ(none.reserved_bytes(), 0u);
}

TEST(NvmeReservation, BadBlocksAndOverflowAreErrors) {
  EXPECT_THROW(nvme_reservation(testing::small_graph(), nvme_plan(), 0, kMiB), Error);
  EXPECT_THROW(nvme_reservation(testing::small_graph(), nvme_plan(), 3000, kMiB), Error);
  const Graph huge = sized(uint64_t{1} << 61, uint64_t{1} << 61, uint64_t{1} << 61);
  EXPECT_THROW(nvme_reservation(huge, nvme_plan(), 4096, kMiB), Error);
}

}  // namespace
}  // namespace memwall
