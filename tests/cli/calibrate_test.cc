// `memwall calibrate --quick`: a profile of this machine that --gpu-file
// reads back; bad input in one line, exit 2.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "importers/torch_env.h"
#include "memwall/hw/hardware.h"
#include "run_memwall.h"

namespace memwall::testing {
namespace {

TEST(CalibrateCli, QuickProfileReadsBackWithGpuFile) {
  MEMWALL_REQUIRE_TORCH();  // the compute probe runs torch
  const std::string out =
      ::testing::TempDir() + "memwall_calibrate_" + std::to_string(::getpid()) + ".json";
  RunResult r = run_memwall("calibrate --quick --json --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json report = nlohmann::json::parse(r.out);
  const Hardware hw = read_hardware_file(out);
  EXPECT_EQ(hw.name, report.at("profile").at("name").get<std::string>());
  EXPECT_GT(hw.peak_flops_fp32, 1e8);  // any CPU does 0.1 GFLOP/s
  EXPECT_GT(hw.hbm_bandwidth, 1e8);
  EXPECT_GT(hw.h2d_bandwidth, 1e8);
  EXPECT_GT(hw.d2h_bandwidth, 1e8);
  EXPECT_GT(hw.nvme_write_bandwidth, 1e6);  // through the NVMe engine
  EXPECT_GT(hw.nvme_read_bandwidth, 1e6);
  EXPECT_GT(hw.cpu_adam_params_per_s, 1e6);  // through the runtime's CPU step
  EXPECT_GT(hw.host_memory_bytes, uint64_t{1} << 28);
  EXPECT_EQ(hw.compute_efficiency, 1.0);
  EXPECT_EQ(report.at("base"), "l4");
  // Note [Copy latency]: measured through the copy engine, not the base's.
  EXPECT_GT(hw.pcie_latency, 0.0);
  EXPECT_LT(hw.pcie_latency, 0.1);
  for (const auto& field : report.at("from_base")) EXPECT_NE(field, "pcie_latency");
  // The profile drives the cost model like any other.
  RunResult inspect =
      run_memwall("inspect --model resnet50 --batch 2 --dtype fp32 --gpu-file " + out);
  EXPECT_EQ(inspect.exit_code, 0) << inspect.err;
  std::filesystem::remove(out);
}

TEST(CalibrateCli, ComparesWithABuiltinSideBySide) {
  MEMWALL_REQUIRE_TORCH();
  RunResult r = run_memwall("calibrate --quick --compare h100-80g");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("beside the built-in 'h100-80g' (NVIDIA H100 80GB SXM5"), std::string::npos)
      << r.out;
  // Every row, with the H100's side filled in (its NVMe is not in its profile).
  EXPECT_NE(r.out.find("measured/built-in"), std::string::npos);
  for (const char* row : {"matmul fp32", "matmul bf16", "memory bandwidth", "device memory",
                          "host -> device", "device -> host", "CPU AdamW step", "host memory"}) {
    const size_t at = r.out.find(std::string("  ") + row, r.out.find("beside the built-in"));
    ASSERT_NE(at, std::string::npos) << row << "\n" << r.out;
    const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
    EXPECT_EQ(line.find(" - "), std::string::npos) << line;  // both sides have a figure
  }
  RunResult j = run_memwall("calibrate --quick --json --compare t4");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(nlohmann::json::parse(j.out).at("compared_with"), "t4");
}

TEST(CalibrateCli, BadInputIsOneLine) {
  for (const char* args : {"calibrate --base nope", "calibrate --compare nope",
                           "calibrate --quick --out /nonexistent/p.json"}) {
    RunResult r = run_memwall(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(count_lines(r.err), 1) << args << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

}  // namespace
}  // namespace memwall::testing
