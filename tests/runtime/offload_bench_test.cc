// `memwall bench offload`'s measurements without fio: a write and a read
// row per depth with a figure per repeat, copies of the run's size, and
// the directory left as found. No speed is asserted beyond being positive;
// fio and the command end to end are tests/cli/bench_offload_test.cc's.
#include <gtest/gtest.h>

#include "memwall/runtime/probes.h"
#include "nvme_test_util.h"

namespace memwall::runtime {
namespace {

TEST(OffloadBench, RowsPerDepthThenCopiesOfTheRunsSize) {
  const testing_nvme::TempDir dir;
  int engine_runs = 0;
  const OffloadBench bench = measure_offload({.dir = dir.path(),
                                              .size = 8 << 20,
                                              .block = 1 << 20,
                                              .tensor = 4 << 20,
                                              .depths = {2, 4},
                                              .repeats = 2,
                                              .fio = false},
                                             [&](const NvmeRates&, int) { ++engine_runs; });
  EXPECT_EQ(engine_runs, 4);  // depths x repeats
  ASSERT_EQ(bench.nvme.size(), 4u);
  EXPECT_EQ(bench.nvme[0].op, "write");
  EXPECT_EQ(bench.nvme[1].op, "read");
  EXPECT_EQ(bench.nvme[2].depth, 4);
  for (const NvmeAgainstFio& row : bench.nvme) {
    ASSERT_EQ(row.engine_gbps.size(), 2u);
    EXPECT_GT(row.engine_gbps[0], 0);
    EXPECT_TRUE(row.fio_gbps.empty());
  }
  EXPECT_EQ(bench.copy_bytes, uint64_t{8} << 20);
  EXPECT_GT(bench.copies.h2d_gbps, 0);
  EXPECT_GT(bench.copies.reference_d2h_gbps, 0);
  EXPECT_TRUE(dir.entries().empty());
}

}  // namespace
}  // namespace memwall::runtime
