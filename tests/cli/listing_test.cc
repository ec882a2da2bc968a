#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

}  // namespace
}  // namespace memwall
