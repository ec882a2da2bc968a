// Concurrent allocate/free from several threads on real host memory; the
// Makefile's test-tsan target runs this under ThreadSanitizer.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "alloc_test_util.h"

namespace memwall::alloc {
namespace {

#ifdef MEMWALL_ALLOC_REDUCED_STRESS
constexpr int kOpsPerThread = 4000;
#else
constexpr int kOpsPerThread = 40000;
#endif
constexpr int kThreads = 4;

class Threads : public ::testing::TestWithParam<std::string_view> {};

// Each thread owns its allocations and stamps them with its id; a stamp
// changed by another thread means two live blocks overlapped.
TEST_P(Threads, ConcurrentAllocateAndFreeKeepBlocksPrivate) {
  auto rig = testing::host_rig(GetParam(), 1024 * kMiB);
  Allocator& allocator = *rig.allocator;
  std::vector<std::thread> threads;
  std::atomic<int> corrupted{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 random(static_cast<uint64_t>(t) + 1);
      std::vector<std::pair<unsigned char*, uint64_t>> mine;
      const auto stamp = static_cast<unsigned char>(t + 1);
      for (int op = 0; op < kOpsPerThread; ++op) {
        if (mine.size() < 16 && (mine.empty() || random() % 2 == 0)) {
          // Small to a few MiB; every other thread's stream is shared.
          const uint64_t bytes = 1 + random() % (random() % 4 == 0 ? 6 * kMiB : 64 * 1024);
          const Allocation a = allocator.allocate(bytes, static_cast<StreamId>(t % 2));
          if (!a) continue;
          auto* p = static_cast<unsigned char*>(a.ptr);
          p[0] = stamp;
          p[bytes - 1] = stamp;
          mine.emplace_back(p, bytes);
        } else {
          const size_t i = random() % mine.size();
          auto [p, bytes] = mine[i];
          if (p[0] != stamp || p[bytes - 1] != stamp) ++corrupted;
          allocator.free(p);
          mine[i] = mine.back();
          mine.pop_back();
        }
        if (op % 1000 == 0) allocator.stats();
      }
      for (auto [p, bytes] : mine) allocator.free(p);
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(corrupted.load(), 0);
  const Stats s = allocator.stats();
  EXPECT_EQ(s.live_allocations, 0u);
  EXPECT_EQ(s.allocated_bytes, 0u);
  EXPECT_EQ(s.alloc_calls, s.free_calls + s.oom_events);
  allocator.audit();
}

INSTANTIATE_TEST_SUITE_P(Policies, Threads, ::testing::Values("caching", "expandable", "stitching"),
                         testing::policy_name);

}  // namespace
}  // namespace memwall::alloc
