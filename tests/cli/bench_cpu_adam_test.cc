// `memwall bench cpu-adam` end to end, small: every contender has a figure
// or says why not, rounds alternate, bad input is one line.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "importers/torch_env.h"
#include "run_memwall.h"

namespace memwall::testing {
namespace {

constexpr const char* kSmall =
    "bench cpu-adam --sizes 5000,1037 --repeats 1 --rounds 2 --bandwidth-size 8MiB --json ";

TEST(CliBenchCpuAdam, WithoutTorchEveryContenderSaysWhy) {
  const auto r = run_memwall(std::string(kSmall) + "--no-torch");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& cases = j.at("cases");
  // Sizes x {no copy, bf16 copy} x thread counts (1, and all when > 1).
  ASSERT_GE(cases.size(), 4u);
  ASSERT_EQ(cases.size() % 4, 0u);
  EXPECT_EQ(cases[0]["params"], 5000);
  EXPECT_EQ(cases[0]["threads"], 1);
  EXPECT_EQ(cases[0]["bf16_copy"], false);
  EXPECT_EQ(cases[0]["bytes_per_update"], 28);
  EXPECT_EQ(cases[1]["bf16_copy"], true);
  EXPECT_EQ(cases[1]["bytes_per_update"], 30);
  EXPECT_EQ(cases[2]["params"], 1037);
  for (const auto& c : cases) {
    EXPECT_GT(c["memwall_per_s"].get<double>(), 0);
    EXPECT_GT(c["bandwidth_limit_per_s"].get<double>(), 0);
    EXPECT_EQ(c["rounds_per_s"]["memwall"].size(), 2u);
    for (const char* other : {"torch_foreach", "torch_fused", "deepspeed"}) {
      EXPECT_TRUE(c[std::string(other) + "_per_s"].is_null()) << other;
      EXPECT_EQ(c["why"][other], "not run (--no-torch)") << other;
    }
  }
  ASSERT_EQ(j["overlap"].size(), 2u);
}

TEST(CliBenchCpuAdam, TorchRunsAlternatingWithMemwall) {
  MEMWALL_REQUIRE_TORCH();
  const auto r = run_memwall(std::string(kSmall) + "--copy bf16 --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const auto& c : j.at("cases")) {
    EXPECT_EQ(c["bf16_copy"], true);
    for (const char* torch : {"torch_foreach", "torch_fused"}) {
      ASSERT_TRUE(c[std::string(torch) + "_per_s"].is_number()) << c.dump();
      EXPECT_EQ(c["rounds_per_s"][torch].size(), 2u);
      EXPECT_GT(c["memwall_over"][torch].get<double>(), 0);
    }
    // DeepSpeed is optional (install-deps.sh --deepspeed): a figure or a reason.
    EXPECT_TRUE(c["deepspeed_per_s"].is_number() || c["why"]["deepspeed"].is_string()) << c.dump();
  }
}

TEST(CliBenchCpuAdam, BadInputIsOneLine) {
  const std::pair<const char*, const char*> cases[] = {
      {"--sizes 0", "memwall: error: --sizes: 0 is out of range 1..2^40\n"},
      {"--rounds 0", "memwall: error: --rounds: 0 is out of range 1..100\n"},
      {"--repeats 0", "memwall: error: --repeats: 0 is out of range 1..1000\n"},
      {"--copy fp8", "memwall: error: --copy must be none, bf16 or both, not 'fp8'\n"},
      {"--threads 0", "memwall: error: --threads: 0 is out of range 1..4096\n"},
  };
  for (const auto& [args, message] : cases) {
    const auto r = run_memwall(std::string("bench cpu-adam --no-torch ") + args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.err, message) << args;
  }
}

}  // namespace
}  // namespace memwall::testing
