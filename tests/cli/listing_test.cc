#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <string>

#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "run_memwall.h"

namespace memwall {
namespace {

TEST(CliListing, ModelsListsTheWholeZoo) {
  auto r = testing::run_memwall("models --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), model_zoo().size());
  EXPECT_EQ(j[0]["name"], "gpt2-small");
  auto human = testing::run_memwall("models");
  ASSERT_EQ(human.exit_code, 0);
  for (const ModelInfo& m : model_zoo()) EXPECT_NE(human.out.find(m.name), std::string::npos);
}

TEST(CliListing, GpusRoundTripAsProfiles) {
  auto r = testing::run_memwall("gpus --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), builtin_gpus().size());
  for (size_t i = 0; i < j.size(); ++i) {
    Hardware hw = hardware_from_json(j[i]);
    EXPECT_EQ(hw.name, builtin_gpus()[i].name);
    EXPECT_EQ(hw.device_memory_bytes, builtin_gpus()[i].device_memory_bytes);
  }
  auto human = testing::run_memwall("gpus");
  ASSERT_EQ(human.exit_code, 0);
  EXPECT_NE(human.out.find("rtx4090"), std::string::npos);
}

// What `memwall gpus --json` prints is a valid --gpu-file: saved, edited and
// passed back, --gpu picks each built-in profile from it (every field is
// compared in tests/hw/json_test.cc, ArraysOfProfilesRoundTrip).
TEST(CliListing, GpusJsonIsAGpuFile) {
  auto r = testing::run_memwall("gpus --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string path =
      ::testing::TempDir() + "memwall_gpus_" + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << r.out;
  const std::string work = "inspect --model gpt2-small --batch 1 --seq 64 --json ";
  for (const Hardware& hw : builtin_gpus()) {
    const auto builtin = testing::run_memwall(work + "--gpu " + hw.name);
    const auto from_file = testing::run_memwall(work + "--gpu-file " + path + " --gpu " + hw.name);
    ASSERT_EQ(from_file.exit_code, 0) << hw.name << ": " << from_file.err;
    EXPECT_EQ(from_file.out, builtin.out) << hw.name;
  }
  // An edit is read back.
  auto profiles = nlohmann::json::parse(r.out);
  profiles[7]["device_memory_bytes"] = uint64_t{8} << 30;
  std::ofstream(path) << profiles.dump(2);
  const auto edited = testing::run_memwall(work + "--gpu-file " + path + " --gpu t4");
  ASSERT_EQ(edited.exit_code, 0) << edited.err;
  EXPECT_EQ(nlohmann::json::parse(edited.out)["device_memory_bytes"], uint64_t{8} << 30);
  // A name the file does not hold: one line, exit 2.
  const auto missing = testing::run_memwall(work + "--gpu-file " + path + " --gpu h300");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.err, "memwall: error: hardware file '" + path +
                             "': holds 10 profiles and none is named 'h300' (--gpu): v100-16g, "
                             "v100-32g, a100-40g, a100-80g, h100-80g, h200, l4, t4, rtx3090, "
                             "rtx4090\n");
  std::remove(path.c_str());
}

// A malformed --gpu-file is one line in memwall's words: file, line, column.
TEST(CliListing, MalformedGpuFileIsOneLine) {
  const std::string path =
      ::testing::TempDir() + "memwall_bad_gpu_" + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << "{\"name\": \"x\",\n  \"hbm_bandwidth\": 1e12,,\n}";
  const auto r = testing::run_memwall("inspect --gpu-file " + path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "memwall: error: hardware file '" + path +
                       "': invalid JSON at line 2, column 25: expected a string (an object key)\n");
  EXPECT_TRUE(r.out.empty());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace memwall
