// `memwall bench offload` end to end, small: the engine and fio at one
// depth on a directory of the test's own, which is left empty.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "run_memwall.h"

namespace memwall::testing {
namespace {

TEST(CliBenchOffload, EngineAndFioSideBySide) {
  const std::string dir =
      ::testing::TempDir() + "memwall_bench_offload_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const auto r =
      run_memwall("bench offload --dir " + dir + " --size 16MiB --tensor 4MiB --depths 4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["op"], "write");
  EXPECT_EQ(j["rows"][1]["op"], "read");
  for (const auto& row : j["rows"]) {
    EXPECT_EQ(row["depth"], 4);
    EXPECT_GT(row["engine_gbps"].get<double>(), 0);
    EXPECT_GT(row["fio_gbps"].get<double>(), 0);
    EXPECT_GT(row["ratio"].get<double>(), 0);
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir));  // swap and fio files removed
  std::filesystem::remove_all(dir);
}

TEST(CliBenchOffload, BadInputIsOneLine) {
  auto r =
      run_memwall("bench offload --dir /nonexistent/memwall --no-fio --size 8MiB --tensor 4MiB");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err,
            "memwall: error: nvme: swap directory '/nonexistent/memwall': No such file or "
            "directory\n");
  r = run_memwall("bench offload --no-fio --size 8MiB --tensor 16MiB");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memwall: error: --tensor 16MiB is larger than --size 8MiB\n");
  r = run_memwall("bench offload --no-fio --size 8MiB --tensor 4MiB --depths 0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memwall: error: --depths: 0 is out of range 1..4096\n");
}

}  // namespace
}  // namespace memwall::testing
