// Random stress: millions of allocations and frees with DL-like sizes on
// several streams, every operation checked incrementally and the allocator
// audited in full periodically.
//
// Release runs 10 million operations (allocations + frees) per policy on the
// simulated device (~seconds each). Sanitizer builds define
// MEMWALL_ALLOC_REDUCED_STRESS and run 300,000, since ASan/TSan slow every
// operation 5-20x; MEMWALL_STRESS_OPS overrides both.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "alloc_test_util.h"

namespace memwall::alloc {
namespace {

#ifdef MEMWALL_ALLOC_REDUCED_STRESS
constexpr uint64_t kDefaultOps = 300'000;
#else
constexpr uint64_t kDefaultOps = 10'000'000;
#endif
constexpr uint64_t kAuditEvery = 250'000;
constexpr StreamId kStreams = 3;

uint64_t stress_ops() {
  const char* text = std::getenv("MEMWALL_STRESS_OPS");
  return text != nullptr ? std::strtoull(text, nullptr, 10) : kDefaultOps;
}

// Sizes like a transformer's and a CNN's tensors: biases and norms (KiB),
// weight matrices and activations (MiB), attention scores and logits (tens
// of MiB), plus odd sizes around them so rounding is exercised.
class TensorSizes {
 public:
  uint64_t operator()(std::mt19937_64& random) {
    static constexpr uint64_t kCommon[] = {768 * 4,
                                           3072 * 4,
                                           768 * 768 * 2,
                                           768 * 3072 * 2,
                                           8 * 1024 * 768 * 2,
                                           8 * 1024 * 3072 * 2,
                                           8 * 12 * 1024 * 64 * 2,
                                           50257 * 768 * 2,
                                           64 * 64 * 3 * 3 * 4,
                                           32 * 64 * 56 * 56 * 2,
                                           32 * 256 * 14 * 14 * 2,
                                           4 * 1024 * 1024};
    const uint64_t pick = random() % 10;
    if (pick < 5) return kCommon[random() % std::size(kCommon)];
    // Log-uniform from 1 byte to 64 MiB.
    const double exponent = std::uniform_real_distribution<double>(0.0, 26.0)(random);
    return std::max<uint64_t>(1, static_cast<uint64_t>(std::exp2(exponent)));
  }
};

// The incremental checker: live blocks as an interval map (O(log n) per op)
// and the byte counts the allocator must report.
class LiveBlocks {
 public:
  struct Entry {
    uint64_t block_bytes = 0;
    uint64_t requested = 0;
  };
  void add(uintptr_t address, uint64_t block_bytes, uint64_t requested) {
    auto after = live_.lower_bound(address);
    if (after != live_.end()) {
      ASSERT_GE(after->first, address + block_bytes) << "overlaps the next live block";
    }
    if (after != live_.begin()) {
      auto before = std::prev(after);
      ASSERT_LE(before->first + before->second.block_bytes, address)
          << "overlaps the previous live block";
    }
    live_.emplace(address, Entry{block_bytes, requested});
    allocated_ += block_bytes;
    requested_ += requested;
  }
  Entry remove(uintptr_t address) {
    auto it = live_.find(address);
    const Entry entry = it->second;
    allocated_ -= entry.block_bytes;
    requested_ -= entry.requested;
    live_.erase(it);
    return entry;
  }
  uint64_t allocated() const { return allocated_; }
  uint64_t requested() const { return requested_; }
  size_t size() const { return live_.size(); }

 private:
  std::map<uintptr_t, Entry> live_;
  uint64_t allocated_ = 0;
  uint64_t requested_ = 0;
};

struct Outcome {
  uint64_t allocations = 0;
  uint64_t ooms = 0;
  Stats stats;
};

void check_counts(const Allocator& allocator, const LiveBlocks& live, uint64_t capacity) {
  const Stats s = allocator.stats();
  ASSERT_EQ(s.allocated_bytes, live.allocated());
  ASSERT_EQ(s.requested_bytes, live.requested());
  ASSERT_EQ(s.live_allocations, live.size());
  ASSERT_EQ(s.allocated_bytes + s.cached_bytes, s.reserved_bytes) << "bytes unaccounted for";
  ASSERT_LE(s.reserved_bytes, capacity);
  ASSERT_EQ(s.reserved_bytes % kDefaultGranularity, 0u);
  ASSERT_EQ(s.reserved_bytes, allocator.device().chunks_in_use() * kDefaultGranularity);
}

struct Handle {
  void* ptr = nullptr;
  uint64_t bytes = 0;
  uint64_t op = 0;  // the operation that allocated it
};

// Two bytes derived from the allocating operation, at both ends of a block.
void stamp(void* ptr, uint64_t bytes, uint64_t op) {
  auto* p = static_cast<unsigned char*>(ptr);
  p[0] = static_cast<unsigned char>(op);
  p[bytes - 1] = static_cast<unsigned char>((op >> 8) ^ 0x5a);
}

bool stamp_intact(const void* ptr, uint64_t bytes, uint64_t op) {
  const auto* p = static_cast<const unsigned char*>(ptr);
  const bool last = p[bytes - 1] == static_cast<unsigned char>((op >> 8) ^ 0x5a);
  return bytes == 1 ? last : last && p[0] == static_cast<unsigned char>(op);
}

// `touch` writes and checks a stamp at both ends of every block (host memory).
Outcome run_stress(Allocator& allocator, uint64_t ops, uint64_t capacity, bool touch,
                   uint64_t seed) {
  std::mt19937_64 random(seed);
  TensorSizes sizes;
  LiveBlocks live;
  std::vector<Handle> handles;  // for random frees
  Outcome outcome;
  for (uint64_t op = 0; op < ops; ++op) {
    // The live set breathes like forward/backward passes: it builds up to a
    // target that swings between 20 and 400 blocks.
    const double phase = static_cast<double>(op % 20000) / 20000.0;
    const auto target = static_cast<size_t>(210 + 190 * std::sin(6.283185307 * phase));
    const bool allocate = handles.empty() || (handles.size() < target && random() % 8 != 0);
    if (allocate) {
      const uint64_t bytes = sizes(random);
      const auto stream = static_cast<StreamId>(random() % kStreams);
      const Stats before = allocator.stats();
      const Allocation a = allocator.allocate(bytes, stream);
      if (!a) {
        EXPECT_TRUE(a.out_of_memory);
        ++outcome.ooms;
        const Stats after = allocator.stats();
        EXPECT_EQ(after.oom_events, before.oom_events + 1);
        EXPECT_EQ(after.allocated_bytes, before.allocated_bytes);
        check_counts(allocator, live, capacity);
        if (!handles.empty()) {
          const size_t i = random() % handles.size();
          live.remove(reinterpret_cast<uintptr_t>(handles[i].ptr));
          allocator.free(handles[i].ptr);
          handles[i] = handles.back();
          handles.pop_back();
        }
        continue;
      }
      ++outcome.allocations;
      EXPECT_GE(a.block_bytes, bytes);
      live.add(reinterpret_cast<uintptr_t>(a.ptr), a.block_bytes, bytes);
      if (::testing::Test::HasFatalFailure()) return outcome;
      if (touch) stamp(a.ptr, bytes, op);
      handles.push_back({a.ptr, bytes, op});
    } else {
      const size_t i = random() % handles.size();
      const auto [ptr, bytes, stamped_at] = handles[i];
      if (touch && !stamp_intact(ptr, bytes, stamped_at)) {
        ADD_FAILURE() << "a live block was overwritten";
        return outcome;
      }
      live.remove(reinterpret_cast<uintptr_t>(ptr));
      allocator.free(ptr);
      handles[i] = handles.back();
      handles.pop_back();
    }
    check_counts(allocator, live, capacity);
    if (::testing::Test::HasFatalFailure()) return outcome;
    if (op % kAuditEvery == 0) allocator.audit();
    if (op % 1'000'000 == 999'999) allocator.empty_cache();
  }
  allocator.audit();
  outcome.stats = allocator.stats();
  for (const Handle& handle : handles) allocator.free(handle.ptr);
  allocator.empty_cache();
  allocator.audit();
  EXPECT_EQ(allocator.stats().reserved_bytes, 0u) << "memory left after freeing everything";
  return outcome;
}

class Stress : public ::testing::TestWithParam<std::string_view> {};

TEST_P(Stress, TenMillionOperationsKeepEveryByteAccountedFor) {
  constexpr uint64_t kCapacity = uint64_t{3} << 30;
  auto rig = testing::sim_rig(GetParam(), kCapacity);
  const uint64_t ops = stress_ops();
  const Outcome outcome = run_stress(*rig.allocator, ops, kCapacity, false, 42);
  EXPECT_GT(outcome.allocations, ops / 3);
  const Stats& s = outcome.stats;
  std::printf(
      "%s: %llu ops, %llu allocations, %llu OOM, peak requested %.1f MiB, peak allocated %.1f "
      "MiB, peak reserved %.1f MiB, fragmentation %.3f, stitches %llu\n",
      std::string(GetParam()).c_str(), static_cast<unsigned long long>(ops),
      static_cast<unsigned long long>(outcome.allocations),
      static_cast<unsigned long long>(outcome.ooms),
      static_cast<double>(s.peak_requested_bytes) / double(kMiB),
      static_cast<double>(s.peak_allocated_bytes) / double(kMiB),
      static_cast<double>(s.peak_reserved_bytes) / double(kMiB), s.fragmentation(),
      static_cast<unsigned long long>(s.stitches));
}

// Fewer operations on real memory: stamps at both ends of each block catch
// two live blocks sharing physical memory, which address checks cannot see.
TEST_P(Stress, HostMemoryStampsSurvive) {
  constexpr uint64_t kCapacity = uint64_t{1} << 30;
  auto rig = testing::host_rig(GetParam(), kCapacity);
  run_stress(*rig.allocator, std::min<uint64_t>(stress_ops(), 200'000), kCapacity, true, 7);
}

INSTANTIATE_TEST_SUITE_P(Policies, Stress, ::testing::Values("caching", "expandable", "stitching"),
                         testing::policy_name);

}  // namespace
}  // namespace memwall::alloc
