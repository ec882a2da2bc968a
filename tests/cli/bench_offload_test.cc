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
  const auto r = run_memwall("bench offload --dir " + dir +
                             " --size 16MiB --tensor 4MiB --depths 4 --repeats 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& cases = j["cases"];
  ASSERT_EQ(cases.size(), 4u);  // write, read; then both copies
  EXPECT_EQ(cases[0]["op"], "write");
  EXPECT_EQ(cases[1]["op"], "read");
  for (int i = 0; i < 2; ++i) {
    const auto& c = cases[i];
    EXPECT_EQ(c["kind"], "nvme");
    EXPECT_EQ(c["depth"], 4);
    EXPECT_EQ(c["block"], 1 << 20);
    ASSERT_EQ(c["memwall_runs_gbps"].size(), 2u);
    ASSERT_EQ(c["fio_runs_gbps"].size(), 2u);
    EXPECT_GT(c["memwall_gbps"].get<double>(), 0);
    EXPECT_GT(c["fio_gbps"].get<double>(), 0);
    EXPECT_GT(c["ratio"].get<double>(), 0);
  }
  EXPECT_EQ(cases[2]["op"], "host_to_device");
  EXPECT_EQ(cases[3]["op"], "device_to_host");
  for (int i = 2; i < 4; ++i) {
    EXPECT_EQ(cases[i]["kind"], "copy");
    EXPECT_GT(cases[i]["memwall_gbps"].get<double>(), 0);
    EXPECT_GT(cases[i]["memcpy_gbps"].get<double>(), 0) << cases[i].dump();
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
  r = run_memwall("bench offload --no-fio --size 8MiB --tensor 4MiB --repeats 0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memwall: error: --repeats: 0 is out of range 1..100\n");
}

TEST(CliBenchOffload, WithoutFioSaysWhy) {
  const auto r = run_memwall("bench offload --no-fio --size 8MiB --tensor 4MiB --depths 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["cases"][0]["fio_gbps"].is_null());
  EXPECT_EQ(j["cases"][0]["why"], "not run (--no-fio)");
}

}  // namespace
}  // namespace memwall::testing
