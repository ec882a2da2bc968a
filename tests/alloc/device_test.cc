// The backends: HostVMM through real memory, the simulated device's checks,
// and the CUDA backend (skipped without a driver).
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "alloc_test_util.h"
#include "memwall/alloc/device.h"
#include "memwall/alloc/error.h"

namespace memwall::alloc {
namespace {

using testing::kGranule;

TEST(HostVmm, MapsWritesAndReadsThroughChunks) {
  auto device = make_host_vmm(8 * kGranule);
  EXPECT_EQ(device->capacity(), 8 * kGranule);
  EXPECT_EQ(device->granularity(), kGranule);
  const uintptr_t base = device->reserve(2 * kGranule);
  const ChunkHandle a = *device->create_chunk();
  const ChunkHandle b = *device->create_chunk();
  device->map(base, a);
  device->map(base + kGranule, b);
  auto* bytes = reinterpret_cast<unsigned char*>(base);
  std::memset(bytes, 0xab, 2 * kGranule);
  EXPECT_EQ(bytes[0], 0xab);
  EXPECT_EQ(bytes[2 * kGranule - 1], 0xab);
  device->unmap(base, 2 * kGranule);
  device->release_chunk(a);
  device->release_chunk(b);
  device->unreserve(base, 2 * kGranule);
  EXPECT_EQ(device->chunks_in_use(), 0u);
}

// A buffer stitched from chunks that were mapped at unrelated places keeps
// each chunk's contents: the physical memory moved, not the data.
TEST(HostVmm, StitchesNonAdjacentChunksIntoOneBuffer) {
  auto device = make_host_vmm(8 * kGranule);
  const uintptr_t first = device->reserve(3 * kGranule);
  std::vector<ChunkHandle> chunks;
  for (int i = 0; i < 3; ++i) {
    chunks.push_back(*device->create_chunk());
    device->map(first + i * kGranule, chunks.back());
    std::memset(reinterpret_cast<void*>(first + i * kGranule), 'a' + i, kGranule);
  }
  // Take chunks 0 and 2 (not adjacent) and map them side by side elsewhere.
  device->unmap(first, kGranule);
  device->unmap(first + 2 * kGranule, kGranule);
  const uintptr_t stitched = device->reserve(2 * kGranule);
  device->map(stitched, chunks[2]);
  device->map(stitched + kGranule, chunks[0]);
  const auto* bytes = reinterpret_cast<const char*>(stitched);
  EXPECT_EQ(bytes[0], 'c');
  EXPECT_EQ(bytes[kGranule - 1], 'c');
  EXPECT_EQ(bytes[kGranule], 'a');
  EXPECT_EQ(bytes[2 * kGranule - 1], 'a');
  // One contiguous write across the seam.
  std::memset(reinterpret_cast<void*>(stitched + kGranule - 100), 'z', 200);
  EXPECT_EQ(bytes[kGranule - 100], 'z');
  EXPECT_EQ(bytes[kGranule + 99], 'z');
  EXPECT_EQ(reinterpret_cast<const char*>(first + kGranule)[0], 'b');  // untouched
  device->unmap(stitched, 2 * kGranule);
  device->unmap(first + kGranule, kGranule);
  for (ChunkHandle chunk : chunks) device->release_chunk(chunk);
  device->unreserve(stitched, 2 * kGranule);
  device->unreserve(first, 3 * kGranule);
}

TEST(HostVmm, EnforcesCapacityAndReusesPunchedChunksAsZeros) {
  auto device = make_host_vmm(2 * kGranule + 5);  // rounded down to 2 chunks
  EXPECT_EQ(device->capacity(), 2 * kGranule);
  const ChunkHandle a = *device->create_chunk();
  const ChunkHandle b = *device->create_chunk();
  EXPECT_FALSE(device->create_chunk().has_value());
  const uintptr_t base = device->reserve(kGranule);
  device->map(base, a);
  std::memset(reinterpret_cast<void*>(base), 0x5a, kGranule);
  device->unmap(base, kGranule);
  device->release_chunk(a);
  const ChunkHandle again = *device->create_chunk();
  EXPECT_EQ(again, a);  // the freed slot
  device->map(base, again);
  EXPECT_EQ(reinterpret_cast<const unsigned char*>(base)[123], 0);  // hole punched
  device->unmap(base, kGranule);
  device->release_chunk(again);
  device->release_chunk(b);
  device->unreserve(base, kGranule);
}

TEST(HostVmm, RejectsBadGranularity) {
  EXPECT_THROW(make_host_vmm(kGranule, 3000), Error);
  EXPECT_THROW(make_host_vmm(kGranule, 0), Error);
}

// A range of 2^28 granules (512 TiB): unreserve looks up the last mapping
// before the range's end instead of walking every granule (which took ~20 s
// for a range the size of a large capacity).
TEST(SimDevice, UnreservesAHugeRangeWithoutWalkingItsGranules) {
  auto device = make_sim_device(4 * kGranule);
  const uint64_t bytes = (uint64_t{1} << 28) * kGranule;
  const uintptr_t base = device->reserve(bytes);
  const ChunkHandle chunk = *device->create_chunk();
  device->map(base + bytes - kGranule, chunk);  // the last granule
  try {
    device->unreserve(base, bytes);
    ADD_FAILURE() << "unreserve of a range with a mapping did not throw";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(), "sim: unreserve of a range with mapped chunks");
  }
  // A mapping in the next range does not count against this one.
  const uintptr_t next = device->reserve(kGranule);
  device->unmap(base + bytes - kGranule, kGranule);
  device->map(next, chunk);
  device->unreserve(base, bytes);
  device->unmap(next, kGranule);
  device->unreserve(next, kGranule);
  device->release_chunk(chunk);
}

TEST(SimDevice, ChecksTheMapDiscipline) {
  auto device = make_sim_device(4 * kGranule);
  EXPECT_FALSE(device->host_accessible());
  const uintptr_t base = device->reserve(2 * kGranule);
  const ChunkHandle chunk = *device->create_chunk();
  device->map(base, chunk);
  EXPECT_THROW(device->map(base, chunk), Error);                  // over a mapping
  EXPECT_THROW(device->release_chunk(chunk), Error);              // still mapped
  EXPECT_THROW(device->unmap(base + kGranule, kGranule), Error);  // a hole
  EXPECT_THROW(device->map(base + 2 * kGranule, chunk), Error);   // outside the range
  device->unmap(base, kGranule);
  device->release_chunk(chunk);
  device->unreserve(base, 2 * kGranule);
}

TEST(CudaVmm, RunsOnAGpuOrSkips) {
  std::string why;
  auto device = make_cuda_vmm(0, 0, &why);
  if (device == nullptr) {
    EXPECT_FALSE(why.empty());
    GTEST_SKIP() << "no CUDA VMM device: " << why;
  }
  testing::map_two_chunks_out_of_order(*device);
}

}  // namespace
}  // namespace memwall::alloc
