// Note [Pinned host pool]: reuse by size, the capacity, statistics, and
// concurrent callers (TSan runs this file: Makefile test-tsan).
#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "memwall/runtime/host_pool.h"

namespace memwall::runtime {
namespace {

constexpr uint64_t kPoolMiB = 1 << 20;

TEST(HostPool, BuffersAreAlignedRoundedAndReusedBySize) {
  HostPool pool(16 * kPoolMiB);
  void* first = nullptr;
  {
    HostBuffer a = pool.allocate(1);
    EXPECT_EQ(a.size(), 4096u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % kHostPoolAlignment, 0u);
    std::memset(a.data(), 0xAB, a.size());
    first = a.data();
  }
  HostBuffer again = pool.allocate(4000);  // the same rounded size: the cached buffer
  EXPECT_EQ(again.data(), first);
  const HostPoolStats s = pool.stats();
  EXPECT_EQ(s.allocations, 2u);
  EXPECT_EQ(s.reuses, 1u);
  EXPECT_EQ(s.maps, 1u);
  EXPECT_EQ(s.in_use_bytes, 4096u);
  EXPECT_EQ(s.mapped_bytes, 4096u);
  EXPECT_EQ(s.peak_in_use_bytes, 4096u);
}

TEST(HostPool, CapacityEvictsCachedBuffersThenRefusesInOneLine) {
  HostPool pool(8 * kPoolMiB);
  { HostBuffer a = pool.allocate(6 * kPoolMiB); }  // cached
  HostBuffer b = pool.allocate(4 * kPoolMiB);      // must unmap the cached 6 MiB first
  EXPECT_EQ(pool.stats().unmaps, 1u);
  EXPECT_EQ(pool.stats().mapped_bytes, 4 * kPoolMiB);
  try {
    HostBuffer c = pool.allocate(5 * kPoolMiB);
    FAIL() << "allocated past the capacity";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("5.00 MiB requested, capacity 8.00 MiB, 4.00 MiB in use"),
              std::string::npos)
        << what;
    EXPECT_EQ(what.find('\n'), std::string::npos);
  }
  EXPECT_THROW(pool.allocate(0), std::invalid_argument);
  EXPECT_THROW(HostPool(0), std::invalid_argument);
  EXPECT_THROW(pool.allocate(UINT64_MAX), std::invalid_argument);
}

TEST(HostPool, MovedBuffersReturnOnceAndTrimUnmapsTheCache) {
  HostPool pool(4 * kPoolMiB);
  HostBuffer a = pool.allocate(kPoolMiB);
  HostBuffer b = std::move(a);
  EXPECT_FALSE(a);
  b = HostBuffer();
  EXPECT_EQ(pool.stats().in_use_bytes, 0u);
  EXPECT_EQ(pool.stats().mapped_bytes, kPoolMiB);
  pool.trim();
  EXPECT_EQ(pool.stats().mapped_bytes, 0u);
  EXPECT_EQ(pool.stats().unpinned_bytes, 0u);
}

TEST(HostPool, ConcurrentCallersKeepEveryByteAccountedFor) {
  HostPool pool(64 * kPoolMiB);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pool, t] {
      for (int i = 0; i < 200; ++i) {
        HostBuffer b = pool.allocate(static_cast<uint64_t>(1 + (i + t) % 5) * 4096);
        static_cast<char*>(b.data())[0] = static_cast<char>(i);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  const HostPoolStats s = pool.stats();
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_EQ(s.allocations, 800u);
  EXPECT_EQ(s.allocations, s.reuses + s.maps);
  EXPECT_LE(s.peak_in_use_bytes, 4u * 5 * 4096);
}

}  // namespace
}  // namespace memwall::runtime
