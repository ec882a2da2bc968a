// Fault injection (MEMWALL_NVME_FAULTS): every kind is either retried to
// success or reported as one line naming file and offset, with the caller's
// data intact; never wrong data. Also the spec parser and the extent
// allocator.
#include "memwall/runtime/nvme_faults.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>

#include "memwall/runtime/extent_allocator.h"
#include "memwall/runtime/nvme_engine.h"
#include "runtime/nvme_test_util.h"

namespace memwall::runtime {
namespace {

using testing_nvme::random_bytes;
using testing_nvme::TempDir;

constexpr uint64_t kFaultMiB = 1 << 20;

NvmeOptions fault_options(const std::string& dir, const std::string& faults) {
  NvmeOptions o;
  o.dirs = {dir};
  o.capacity = 8 * kFaultMiB;
  o.faults = faults;
  return o;
}

// Writes and reads back 2 MiB + 5 (operations 1-3 write, 4-6 read, in
// block order at queue depth 16); returns the engine's stats.
NvmeStats round_trip_with(const std::string& faults) {
  TempDir dir;
  NvmeEngine engine(fault_options(dir.path(), faults));
  auto src = random_bytes(2 * kFaultMiB + 5, 11);
  Extent e = engine.write(src.data(), src.size());
  std::vector<uint8_t> dst(src.size());
  engine.read(e, dst.data(), dst.size());
  EXPECT_EQ(dst, src) << faults;
  return engine.stats();
}

TEST(NvmeFaults, EioIsRetried) {
  NvmeStats s = round_trip_with("eio@2,eio@5");
  EXPECT_EQ(s.faults_injected, 2u);
  EXPECT_EQ(s.retries, 2u);
  EXPECT_EQ(s.operations, 8u);
}

TEST(NvmeFaults, ShortCompletionsAreResubmitted) {
  NvmeStats s = round_trip_with("short@1,short@3,short@6");
  EXPECT_EQ(s.short_completions, 3u);
  // The 5-byte tail block (operation 3) is one sector: half of it is no
  // progress, which counts as a retry; the others made progress.
  EXPECT_EQ(s.retries, 1u);
}

TEST(NvmeFaults, CorruptReadIsDetectedAndReRead) {
  NvmeStats s = round_trip_with("corrupt@5");
  EXPECT_EQ(s.crc_mismatches, 1u);
  EXPECT_EQ(s.retries, 1u);
  // corrupt@N on a write corrupts the next read.
  s = round_trip_with("corrupt@1");
  EXPECT_EQ(s.crc_mismatches, 1u);
}

TEST(NvmeFaults, EnvironmentVariable) {
  ASSERT_EQ(setenv("MEMWALL_NVME_FAULTS", "eio@1", 1), 0);
  TempDir dir;
  NvmeOptions o = fault_options(dir.path(), "");
  o.faults.reset();
  {
    NvmeEngine engine(o);
    auto src = random_bytes(100, 1);
    engine.write(src.data(), src.size());
    EXPECT_EQ(engine.stats().retries, 1u);
  }
  unsetenv("MEMWALL_NVME_FAULTS");
}

TEST(NvmeFaults, EnospcIsOneClearErrorAndTheSourceIsIntact) {
  TempDir dir;
  NvmeEngine engine(fault_options(dir.path(), "enospc@2"));
  auto src = random_bytes(3 * kFaultMiB, 5);
  const auto copy = src;
  std::string error;
  try {
    engine.write(src.data(), src.size());
  } catch (const NvmeError& e) {
    error = e.what();
  }
  EXPECT_EQ(error, "nvme: write failed: No space left on device after 0 retries (file " +
                       engine.files()[0] + ", offset 1048576, length 1048576)");
  EXPECT_EQ(src, copy);
  EXPECT_EQ(engine.free_blocks(), engine.total_blocks());  // the convenience freed its extent
  // Nothing half-written is readable, and the tensor can be written again.
  Extent e = engine.allocate(src.size());
  std::vector<uint8_t> dst(src.size());
  EXPECT_THROW(engine.read(e, dst.data(), dst.size()), NvmeError);
  engine.write(e, src.data(), src.size());
  engine.read(e, dst.data(), dst.size());
  EXPECT_EQ(dst, src);
}

TEST(NvmeFaults, PersistentEioIsOneClearError) {
  TempDir dir;
  NvmeOptions o = fault_options(dir.path(), "eio@1,eio@2,eio@3");
  o.max_retries = 2;
  NvmeEngine engine(o);
  auto src = random_bytes(10'000, 5);
  const auto copy = src;
  try {
    engine.write(src.data(), src.size());
    ADD_FAILURE() << "no error";
  } catch (const NvmeError& e) {
    EXPECT_EQ(std::string(e.what()),
              "nvme: write failed: Input/output error after 2 retries (file " + engine.files()[0] +
                  ", offset 0, length 12288)");
  }
  EXPECT_EQ(src, copy);
}

TEST(NvmeFaults, PersistentCorruptionNamesFileAndOffset) {
  TempDir dir;
  NvmeOptions o = fault_options(dir.path(), "");
  o.block_size = 64 * 1024;
  NvmeEngine engine(o);
  auto src = random_bytes(200'000, 9);
  Extent e = engine.write(src.data(), src.size());
  // Flip a byte of the extent's third block on disk, behind the engine.
  auto [file, offset] = engine.locate(e.first_block + 2);
  int fd = testing_nvme::reopen(engine, file, O_RDWR);
  ASSERT_GE(fd, 0);
  uint8_t byte = 0;
  ASSERT_EQ(pread(fd, &byte, 1, static_cast<off_t>(offset + 100)), 1);
  byte ^= 0x40;
  ASSERT_EQ(pwrite(fd, &byte, 1, static_cast<off_t>(offset + 100)), 1);
  fsync(fd);
  close(fd);
  std::vector<uint8_t> dst(src.size());
  try {
    engine.read(e, dst.data(), dst.size());
    ADD_FAILURE() << "corruption not detected";
  } catch (const NvmeError& err) {
    std::string what = err.what();
    EXPECT_EQ(what.rfind("nvme: CRC32C mismatch in block 2 after 4 reads, stored ", 0), 0u) << what;
    EXPECT_NE(what.find("(file " + engine.files()[file] + ", offset " + std::to_string(offset) +
                        ", length " + std::to_string(65536) + ")"),
              std::string::npos)
        << what;
  }
  EXPECT_EQ(engine.stats().crc_mismatches, 4u);
}

TEST(NvmeFaults, ParseErrors) {
  NvmeFaultPlan plan = parse_nvme_faults("eio@3,short@5,enospc@7,corrupt@9");
  EXPECT_EQ(plan.take(3), NvmeFault::kEio);
  EXPECT_EQ(plan.take(5), NvmeFault::kShort);
  EXPECT_EQ(plan.take(7), NvmeFault::kEnospc);
  EXPECT_EQ(plan.take(9), NvmeFault::kCorrupt);
  EXPECT_EQ(plan.take(4), NvmeFault::kNone);
  EXPECT_TRUE(parse_nvme_faults("").at.empty());
  EXPECT_TRUE(parse_nvme_faults("nodirect").no_direct);
  for (const char* bad : {"bogus@1", "eio@0", "eio", "eio@x", "eio@3,short@3", "eio@-1"}) {
    EXPECT_THROW(parse_nvme_faults(bad), std::invalid_argument) << bad;
  }
  try {
    parse_nvme_faults("eio@1,bogus@2");
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "nvme: bad fault 'bogus@2' in 'eio@1,bogus@2': unknown kind 'bogus' (want KIND@N, "
              "KIND eio|short|enospc|corrupt, N >= 1; or nodirect)");
  }
}

TEST(ExtentAllocator, FirstFitAndCoalescing) {
  ExtentAllocator a(10);
  EXPECT_EQ(a.allocate(3), 0u);
  EXPECT_EQ(a.allocate(3), 3u);
  EXPECT_EQ(a.allocate(3), 6u);
  EXPECT_EQ(a.allocate(2), std::nullopt);
  a.free(3, 3);
  EXPECT_EQ(a.largest_free_run(), 3u);
  a.free(0, 3);
  EXPECT_EQ(a.largest_free_run(), 6u);  // merged with its right neighbour
  EXPECT_EQ(a.allocate(5), 0u);
  a.free(0, 5);
  a.free(6, 3);
  EXPECT_EQ(a.free_blocks(), 10u);
  EXPECT_EQ(a.largest_free_run(), 10u);
  EXPECT_THROW(a.free(2, 1), std::logic_error);
  EXPECT_THROW(a.free(9, 2), std::logic_error);
}

// Note [NVMe reservation] (src/plan/nvme_reservation.cc): why the executor
// never frees a buffer's extent. Room for each buffer once (2 + 1 + 1 + 1
// blocks) is not enough once extents come and go: X (2 blocks) leaves, A
// is rewritten into X's front, and X finds 2 blocks free, none 2 long.
TEST(ExtentAllocator, FreedExtentsFragmentTheSumOfTheBuffers) {
  ExtentAllocator a(5);
  EXPECT_EQ(a.allocate(2), 0u);  // X
  EXPECT_EQ(a.allocate(1), 2u);  // L, kept
  EXPECT_EQ(a.allocate(1), 3u);  // A
  EXPECT_EQ(a.allocate(1), 4u);  // M, kept
  a.free(0, 2);                  // X leaves
  a.free(3, 1);                  // A is written again
  EXPECT_EQ(a.allocate(1), 0u);
  EXPECT_EQ(a.free_blocks(), 2u);
  EXPECT_EQ(a.allocate(2), std::nullopt);  // X comes back
  // Allocated once each and never freed, the same buffers fill it exactly.
  ExtentAllocator kept(5);
  for (const uint64_t blocks : {2, 1, 1, 1}) EXPECT_TRUE(kept.allocate(blocks));
  EXPECT_EQ(kept.free_blocks(), 0u);
}

}  // namespace
}  // namespace memwall::runtime
