// Chunk runs (Note [Chunk runs] in device.h): the granule-to-chunk map, the
// devices' run calls and their discipline checks, and allocations whose cost
// must not grow with their bytes (1 PiB, 2^62 bytes), checked by counting
// device calls.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "../../src/alloc/chunk_map.h"
#include "alloc_test_util.h"

namespace memwall::alloc {
namespace {

using testing::error_of;
using testing::kGranule;

constexpr uint64_t kPiB = uint64_t{1} << 50;

std::vector<std::pair<uint64_t, uint64_t>> as_pairs(const std::vector<GranuleSpan>& spans) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const GranuleSpan& span : spans) out.emplace_back(span.start, span.count);
  return out;
}

TEST(ChunkMap, MergesRunsThatContinueInGranulesAndHandles) {
  ChunkMap map;
  map.insert(0, {10, 4});
  map.insert(4, {14, 2});   // continues both: the same entry
  map.insert(6, {100, 1});  // continues the granules only
  EXPECT_EQ(map.mapped(), 7u);
  EXPECT_EQ(map.end(), 7u);
  std::vector<GranuleSpan> spans;
  map.mapped_spans(0, 100, spans);
  EXPECT_EQ(as_pairs(spans), (std::vector<std::pair<uint64_t, uint64_t>>{{0, 7}}));
  std::vector<ChunkRun> all;
  map.clear(all);
  EXPECT_EQ(all, (std::vector<ChunkRun>{{10, 6}, {100, 1}}));
  EXPECT_TRUE(map.empty());
  EXPECT_TRUE(map.consistent());
}

TEST(ChunkMap, ErasesPartsOfRunsAndFindsHoles) {
  ChunkMap map;
  map.insert(0, {10, 6});
  map.insert(6, {100, 1});
  std::vector<ChunkRun> out;
  map.erase(2, 5, out);  // the middle of the first run
  EXPECT_EQ(out, (std::vector<ChunkRun>{{12, 3}}));
  EXPECT_EQ(map.mapped(), 4u);
  EXPECT_EQ(map.mapped_in(0, 8), 4u);
  EXPECT_EQ(map.mapped_in(3, 5), 0u);
  std::vector<GranuleSpan> gaps;
  map.holes(0, 8, gaps);
  EXPECT_EQ(as_pairs(gaps), (std::vector<std::pair<uint64_t, uint64_t>>{{2, 3}, {7, 1}}));
  EXPECT_EQ(map.mapped_end(0, 8), 7u);
  EXPECT_EQ(map.mapped_end(2, 5), 2u);  // nothing mapped there
  EXPECT_EQ(map.mapped_end(0, 4), 2u);
  // The end of one entry; then two whole entries at once.
  out.clear();
  map.erase(1, 2, out);
  map.erase(5, 7, out);
  EXPECT_EQ(out, (std::vector<ChunkRun>{{11, 1}, {15, 1}, {100, 1}}));
  EXPECT_EQ(map.mapped(), 1u);
  EXPECT_EQ(map.mapped_in(0, 100), 1u);
  EXPECT_TRUE(map.consistent());
  EXPECT_EQ(error_of([&] { map.insert(0, {7, 1}); }), "chunk map: insert over a mapping");
  EXPECT_EQ(error_of([&] { map.erase(0, 2, out); }), "chunk map: erase of a hole");
}

TEST(SimDevice, CreatesMapsAndReleasesRunsUnderTheDiscipline) {
  auto device = make_sim_device(16 * kGranule);
  std::vector<ChunkRun> runs;
  ASSERT_TRUE(device->create_chunks(10, runs));
  EXPECT_EQ(runs, (std::vector<ChunkRun>{{0, 10}}));
  EXPECT_FALSE(device->create_chunks(7, runs));  // all or none
  EXPECT_EQ(device->chunks_in_use(), 10u);
  const uintptr_t base = device->reserve(12 * kGranule);
  device->map_chunks(base, {0, 10});
  EXPECT_EQ(error_of([&] {
              device->map_chunks(base + 10 * kGranule, {5, 1});
            }),
            "sim: map of a chunk that is mapped elsewhere (memory shared by two blocks)");
  runs.clear();
  ASSERT_TRUE(device->create_chunks(2, runs));
  EXPECT_EQ(error_of([&] { device->map_chunks(base + 9 * kGranule, runs[0]); }),
            "sim: map over a mapped granule");
  EXPECT_EQ(error_of([&] { device->map_chunks(base + 11 * kGranule, runs[0]); }),
            "sim: map or unmap outside a reserved range");
  EXPECT_EQ(error_of([&] {
              device->map_chunks(base + 10 * kGranule, {99, 2});
            }),
            "sim: map of an unknown chunk");
  device->map_chunks(base + 10 * kGranule, runs[0]);
  // Part of a run goes; the rest stays mapped.
  device->unmap(base + 3 * kGranule, 3 * kGranule);
  device->release_chunks({3, 3});
  EXPECT_EQ(error_of([&] { device->release_chunks({3, 3}); }), "sim: release of an unknown chunk");
  EXPECT_EQ(error_of([&] { device->release_chunks({0, 1}); }), "sim: release of a mapped chunk");
  EXPECT_EQ(error_of([&] { device->unmap(base + 2 * kGranule, 2 * kGranule); }),
            "sim: unmap of an unmapped granule");
  EXPECT_EQ(error_of([&] { device->unreserve(base, 12 * kGranule); }),
            "sim: unreserve of a range with mapped chunks");
  EXPECT_EQ(device->chunks_in_use(), 9u);
  device->unmap(base, 3 * kGranule);
  device->unmap(base + 6 * kGranule, 6 * kGranule);
  for (const ChunkRun run : {ChunkRun{0, 3}, ChunkRun{6, 4}, runs[0]}) device->release_chunks(run);
  device->unreserve(base, 12 * kGranule);
  EXPECT_EQ(device->chunks_in_use(), 0u);
  // Released handles are handed out again.
  runs.clear();
  ASSERT_TRUE(device->create_chunks(16, runs));
  uint64_t count = 0;
  for (const ChunkRun& run : runs) count += run.count;
  EXPECT_EQ(count, 16u);
  EXPECT_EQ(device->chunks_in_use(), 16u);
}

TEST(SimDevice, APebibyteAndTwoToThe62BytesAreOneRunEach) {
  for (const uint64_t bytes : {kPiB, kMaxRequestBytes}) {
    auto device = make_sim_device(bytes);
    std::vector<ChunkRun> runs;
    ASSERT_TRUE(device->create_chunks(bytes / kGranule, runs));
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].count, bytes / kGranule);
    const uintptr_t base = device->reserve(bytes);
    device->map_chunks(base, runs[0]);
    EXPECT_EQ(error_of([&] { device->release_chunks(runs[0]); }), "sim: release of a mapped chunk");
    device->unmap(base, bytes);
    device->release_chunks(runs[0]);
    device->unreserve(base, bytes);
    EXPECT_EQ(device->chunks_in_use(), 0u);
  }
}

// A run of consecutive memfd slots is one mmap of one piece of the file.
TEST(HostVmm, MapsARunOfSlotsAsOneBuffer) {
  auto device = make_host_vmm(8 * kGranule);
  std::vector<ChunkRun> runs;
  ASSERT_TRUE(device->create_chunks(4, runs));
  ASSERT_EQ(runs, (std::vector<ChunkRun>{{0, 4}}));
  const uintptr_t base = device->reserve(4 * kGranule);
  device->map_chunks(base, runs[0]);
  std::memset(reinterpret_cast<void*>(base), 0x3c, 4 * kGranule);
  // The middle two go back (punched) and come back as one run of zeros.
  device->unmap(base + kGranule, 2 * kGranule);
  device->release_chunks({1, 2});
  runs.clear();
  ASSERT_TRUE(device->create_chunks(2, runs));
  EXPECT_EQ(runs, (std::vector<ChunkRun>{{1, 2}}));
  device->map_chunks(base + kGranule, runs[0]);
  const auto* bytes = reinterpret_cast<const unsigned char*>(base);
  EXPECT_EQ(bytes[kGranule - 1], 0x3c);
  EXPECT_EQ(bytes[kGranule], 0);
  EXPECT_EQ(bytes[3 * kGranule - 1], 0);
  EXPECT_EQ(bytes[3 * kGranule], 0x3c);
  device->unmap(base, 4 * kGranule);
  device->release_chunks({0, 4});
  device->unreserve(base, 4 * kGranule);
  EXPECT_EQ(device->chunks_in_use(), 0u);
}

// A simulated device that counts the calls made to it.
class CountingDevice final : public Device {
 public:
  explicit CountingDevice(uint64_t capacity) : inner_(make_sim_device(capacity)) {}
  std::string_view name() const override { return inner_->name(); }
  uint64_t granularity() const override { return inner_->granularity(); }
  uint64_t capacity() const override { return inner_->capacity(); }
  uint64_t chunks_in_use() const override { return inner_->chunks_in_use(); }
  bool host_accessible() const override { return false; }
  uintptr_t reserve(uint64_t bytes) override {
    ++calls;
    return inner_->reserve(bytes);
  }
  void unreserve(uintptr_t base, uint64_t bytes) override {
    ++calls;
    inner_->unreserve(base, bytes);
  }
  bool create_chunks(uint64_t count, std::vector<ChunkRun>& runs) override {
    ++calls;
    return inner_->create_chunks(count, runs);
  }
  void release_chunks(ChunkRun run) override {
    ++calls;
    inner_->release_chunks(run);
  }
  void map_chunks(uintptr_t address, ChunkRun run) override {
    ++calls;
    ++map_calls;
    inner_->map_chunks(address, run);
  }
  void unmap(uintptr_t address, uint64_t bytes) override {
    ++calls;
    inner_->unmap(address, bytes);
  }
  uint64_t calls = 0;
  uint64_t map_calls = 0;

 private:
  std::unique_ptr<Device> inner_;
};

class HugeRequests : public ::testing::TestWithParam<std::string_view> {};

// A 1 PiB and a 1 MiB buffer on a 4 PiB device, then 2^62 bytes on a device
// of exactly that: a handful of device calls each, though 2^29 and 2^41
// chunks are created, mapped and released.
TEST_P(HugeRequests, CostDeviceCallsNotBytes) {
  for (const uint64_t big : {kPiB, kMaxRequestBytes}) {
    const uint64_t capacity = big == kPiB ? 4 * kPiB : kMaxRequestBytes;
    const uint64_t small = big == kPiB ? kMiB : 0;
    Options options;
    options.arena_bytes = big + small;
    options.offsets = {{0, 0}, {1, big}};
    CountingDevice device(capacity);
    {
      auto a = make_allocator(GetParam(), device, options);
      const Allocation x = a->allocate(big, 0, 0);
      ASSERT_TRUE(x) << GetParam();
      const Allocation y = small != 0 ? a->allocate(small, 0, 1) : Allocation{};
      // Every policy maps the 2 MiB chunk of the small buffer separately
      // (its own segment or range; the plan's arena rounds up to it).
      const uint64_t chunks = big / kGranule + (small != 0 ? 1 : 0);
      Stats s = a->stats();
      EXPECT_EQ(s.chunks_created, chunks);
      EXPECT_EQ(s.maps, chunks);  // counted per chunk, as ever
      EXPECT_EQ(s.peak_reserved_bytes, chunks * kGranule);
      a->audit();
      a->free(x.ptr);
      a->free(y.ptr);
      a->empty_cache();
      s = a->stats();
      EXPECT_EQ(s.reserved_bytes, 0u);
      EXPECT_EQ(s.chunks_released, chunks);
      a->audit();
    }
    EXPECT_EQ(device.chunks_in_use(), 0u);
    EXPECT_LE(device.map_calls, 2u) << GetParam();
    EXPECT_LE(device.calls, 16u) << GetParam();
  }
}

// A request no device of 80 GiB can hold (for "plan": an arena of 2^62
// bytes) is out of memory at once.
TEST_P(HugeRequests, BeyondTheDeviceAreOutOfMemoryWithoutWork) {
  CountingDevice device(uint64_t{80} << 30);
  Options options;
  options.arena_bytes = kMaxRequestBytes;
  options.offsets = {{0, 0}, {1, 0}};
  auto a = make_allocator(GetParam(), device, options);
  uint64_t tag = 0;
  for (const uint64_t bytes : {kPiB, kMaxRequestBytes}) {
    const Allocation none = a->allocate(bytes, 0, tag++);
    EXPECT_TRUE(none.out_of_memory);
  }
  EXPECT_EQ(a->stats().chunks_created, 0u);
  EXPECT_EQ(device.map_calls, 0u);
  EXPECT_LE(device.calls, 4u);
  a->audit();
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, HugeRequests,
                         ::testing::Values("caching", "expandable", "stitching", "plan"),
                         testing::policy_name);

// Stitching takes a run's chunks from a free block and maps them, with one
// new chunk, into one buffer: one unmap and two map calls for seven chunks.
TEST(Stitching, MovesRunsOfChunksWithOneCallEach) {
  CountingDevice device(32 * kGranule);
  auto a = make_allocator("stitching", device);
  const Allocation x = a->allocate(12 * kMiB);  // 6 chunks, one run
  const Allocation keep = a->allocate(4 * kMiB);
  a->free(x.ptr);
  const uint64_t maps_before = device.map_calls;
  const Allocation y = a->allocate(14 * kMiB);  // x's 6 chunks + 1 new
  ASSERT_TRUE(y);
  const Stats s = a->stats();
  EXPECT_EQ(s.stitches, 1u);
  EXPECT_EQ(s.chunks_created, 9u);
  EXPECT_EQ(s.unmaps, 1u);
  EXPECT_EQ(s.maps, 6u + 2u + 7u);
  EXPECT_EQ(device.map_calls - maps_before, 2u);
  a->audit();
  a->free(y.ptr);
  a->free(keep.ptr);
  a->empty_cache();
  EXPECT_EQ(a->stats().reserved_bytes, 0u);
  a->audit();
  a.reset();
  EXPECT_EQ(device.chunks_in_use(), 0u);
}

}  // namespace
}  // namespace memwall::alloc
