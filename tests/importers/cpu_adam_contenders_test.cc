// `memwall bench cpu-adam`'s Python contenders: the script's answers read
// into figures and reasons, and an interpreter that cannot start turned
// into a reason for every contender. With torch the whole command runs in
// tests/cli/bench_cpu_adam_test.cc.
#include "memwall/importers/cpu_adam_contenders.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace memwall::importers {
namespace {

TEST(CpuAdamContenders, AnswerIsReadByContender) {
  const CpuAdamTimes t = decode_cpu_adam_times(
      {{"foreach", 0.5}, {"fused_error", "no fused kernel"}}, "not installed");
  EXPECT_EQ(t.seconds.size(), 1u);
  EXPECT_EQ(t.seconds.at("torch_foreach"), 0.5);
  EXPECT_EQ(t.why.at("torch_fused"), "failed: no fused kernel");
  EXPECT_EQ(t.why.at("deepspeed"), "not installed");
}

TEST(CpuAdamContenders, AnErrorIsEveryContendersReason) {
  const CpuAdamTimes t = decode_cpu_adam_times({{"error", "stopped"}}, "deepspeed 0.19.8");
  EXPECT_TRUE(t.seconds.empty());
  for (const char* name : {"torch_foreach", "torch_fused", "deepspeed"}) {
    EXPECT_EQ(t.why.at(name), "stopped") << name;
  }
}

TEST(CpuAdamContenders, AnInterpreterThatCannotStartSaysSo) {
  CpuAdamContenders contenders("/nonexistent/python", 1);
  EXPECT_EQ(contenders.deepspeed(), "the contenders' script failed under /nonexistent/python");
  const CpuAdamTimes t = contenders.time_step(1000, 1, false);
  EXPECT_TRUE(t.seconds.empty());
  EXPECT_EQ(t.why.at("torch_fused"), contenders.deepspeed());
}

}  // namespace
}  // namespace memwall::importers
