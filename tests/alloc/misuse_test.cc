// Misuse gets a one-line Error or a defined out-of-memory result, for every
// policy, and leaves the allocator exactly as it was.
#include <gtest/gtest.h>

#include <cstdlib>

#include "alloc_test_util.h"

namespace memwall::alloc {
namespace {

using testing::error_of;
using testing::kGranule;

constexpr uint64_t kMisuseCapacity = 64 * kMiB;

class Misuse : public ::testing::TestWithParam<std::string_view> {
 protected:
  void SetUp() override {
    Options options;
    options.arena_bytes = 32 * kMiB;
    for (uint64_t tag = 0; tag < 8; ++tag) options.offsets[tag] = tag * 4 * kMiB;
    rig_ = testing::sim_rig(GetParam(), kMisuseCapacity, options);
    live_ = allocator().allocate(3 * kMiB, 0, 0);
    ASSERT_TRUE(live_);
    freed_ = allocator().allocate(1000, 0, 1);
    allocator().free(freed_.ptr);
    before_ = allocator().stats();
  }
  Allocator& allocator() { return *rig_.allocator; }
  // Nothing but the call counters moved, and the allocator still works.
  void expect_unchanged() {
    const Stats after = allocator().stats();
    EXPECT_EQ(after.allocated_bytes, before_.allocated_bytes);
    EXPECT_EQ(after.reserved_bytes, before_.reserved_bytes);
    EXPECT_EQ(after.cached_bytes, before_.cached_bytes);
    EXPECT_EQ(after.live_allocations, before_.live_allocations);
    EXPECT_EQ(after.free_calls, before_.free_calls);
    allocator().audit();
    const Allocation again = allocator().allocate(1000, 0, 2);
    EXPECT_TRUE(again);
    allocator().free(again.ptr);
    allocator().free(live_.ptr);
    allocator().audit();
  }
  std::string policy() const { return std::string(GetParam()); }

  testing::Rig rig_;
  Allocation live_;
  Allocation freed_;
  Stats before_;
};

TEST_P(Misuse, DoubleFree) {
  EXPECT_EQ(error_of([&] { allocator().free(freed_.ptr); }),
            policy() + ": free of " + hex_address(reinterpret_cast<uintptr_t>(freed_.ptr)) +
                ", which is not a live allocation (double free or interior pointer)");
  expect_unchanged();
}

TEST_P(Misuse, InteriorPointer) {
  void* interior = static_cast<char*>(live_.ptr) + 512;
  EXPECT_NE(error_of([&] { allocator().free(interior); }).find("not a live allocation"),
            std::string::npos);
  expect_unchanged();
}

TEST_P(Misuse, ForeignPointer) {
  int on_the_stack = 0;
  EXPECT_EQ(error_of([&] { allocator().free(&on_the_stack); }),
            policy() + ": free of " + hex_address(reinterpret_cast<uintptr_t>(&on_the_stack)) +
                ", which this allocator did not allocate (foreign pointer)");
  expect_unchanged();
}

TEST_P(Misuse, ZeroSizeIsANullAllocationAndFreeOfNullIsANoOp) {
  const Allocation zero = allocator().allocate(0, 0, 3);
  EXPECT_EQ(zero.ptr, nullptr);
  EXPECT_EQ(zero.block_bytes, 0u);
  EXPECT_FALSE(zero.out_of_memory);
  allocator().free(nullptr);
  expect_unchanged();
}

TEST_P(Misuse, AbsurdSizesThrowWithoutOverflowing) {
  for (uint64_t bytes : {kMaxRequestBytes + 1, UINT64_MAX, UINT64_MAX - 511}) {
    EXPECT_EQ(error_of([&] { allocator().allocate(bytes, 0, 3); }),
              policy() + ": request of " + std::to_string(bytes) +
                  " bytes exceeds the largest allocatable size (2^62 bytes)");
  }
  expect_unchanged();
}

TEST_P(Misuse, CapacityExhaustedIsAnOutOfMemoryResult) {
  if (GetParam() == "plan") {
    // The arena is mapped already; a request beyond it is a bad plan.
    EXPECT_NE(error_of([&] { allocator().allocate(5 * kMiB, 0, 7); }).find("ends past the arena"),
              std::string::npos);
  } else {
    for (uint64_t huge : {kMisuseCapacity, kMaxRequestBytes}) {
      const Allocation none = allocator().allocate(huge, 0, 3);
      EXPECT_EQ(none.ptr, nullptr);
      EXPECT_TRUE(none.out_of_memory);
    }
    EXPECT_EQ(allocator().stats().oom_events, 2u);
  }
  // The cached block may have been released to retry; live state is intact.
  const Stats after = allocator().stats();
  EXPECT_EQ(after.allocated_bytes, before_.allocated_bytes);
  EXPECT_EQ(after.live_allocations, 1u);
  allocator().audit();
  allocator().free(live_.ptr);
  allocator().audit();
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, Misuse,
                         ::testing::Values("caching", "expandable", "stitching", "plan"),
                         testing::policy_name);

}  // namespace
}  // namespace memwall::alloc
