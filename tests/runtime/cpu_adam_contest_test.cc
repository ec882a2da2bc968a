// `memwall bench cpu-adam`'s contest on tiny cases with scripted
// contenders: every contender ends with figures from every round or a
// reason, whatever its rounds did. No timing is asserted beyond being
// positive; the command end to end is tests/cli/bench_cpu_adam_test.cc.
#include "memwall/runtime/cpu_adam_contest.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace memwall::runtime {
namespace {

// torch_foreach always takes 2 ms, torch_fused fails in the second round
// of each case, deepspeed is absent.
class ScriptedContenders : public AdamContenders {
 public:
  std::string deepspeed() const override { return "not installed"; }
  ContenderSeconds time_step(int64_t, int, bool) override {
    ContenderSeconds round;
    round.seconds["torch_foreach"] = 0.002;
    if (calls_++ % 2 == 0) round.seconds["torch_fused"] = 0.001;
    round.why["deepspeed"] = deepspeed();
    return round;
  }

 private:
  int calls_ = 0;
};

CpuAdamContest tiny_contest() {
  return {.sizes = {1000, 37},
          .copies = {false, true},
          .thread_counts = {1},
          .bandwidth_bytes = 1 << 20,
          .repeats = 1,
          .rounds = 2};
}

TEST(CpuAdamContest, ContendersHaveFiguresFromEveryRoundOrAReason) {
  std::vector<unsigned> started;
  const CpuAdamContestResults r = run_cpu_adam_contest(tiny_contest(), [&](unsigned threads) {
    started.push_back(threads);
    return std::make_unique<ScriptedContenders>();
  });
  EXPECT_EQ(started, std::vector<unsigned>{1});
  EXPECT_EQ(r.deepspeed, "not installed");
  ASSERT_EQ(r.cases.size(), 4u);  // sizes x copies
  EXPECT_EQ(r.cases[0].params, 1000);
  EXPECT_FALSE(r.cases[0].bf16_copy);
  EXPECT_EQ(r.cases[0].bytes_per_update, 28);
  EXPECT_TRUE(r.cases[1].bf16_copy);
  EXPECT_EQ(r.cases[1].bytes_per_update, 30);
  EXPECT_EQ(r.cases[2].params, 37);
  for (const CpuAdamCase& c : r.cases) {
    EXPECT_EQ(c.rounds, 2);
    EXPECT_GT(c.bandwidth_limit_per_s, 0);
    const ContenderRounds& ours = c.figures.at("memwall");
    ASSERT_EQ(ours.per_s.size(), 2u);
    EXPECT_GT(ours.median_per_s, 0);
    const ContenderRounds& foreach = c.figures.at("torch_foreach");
    EXPECT_EQ(foreach.per_s, std::vector<double>(2, static_cast<double>(c.params) / 0.002));
    EXPECT_DOUBLE_EQ(foreach.memwall_over,
                     (ours.per_s[0] / foreach.per_s[0] + ours.per_s[1] / foreach.per_s[1]) / 2);
    EXPECT_EQ(c.figures.count("torch_fused"), 0u);
    EXPECT_EQ(c.why.at("torch_fused"), "failed in some rounds");
    EXPECT_EQ(c.why.at("deepspeed"), "not installed");
    EXPECT_EQ(c.why.count("torch_foreach"), 0u);
  }
  ASSERT_EQ(r.overlaps.size(), 2u);
  EXPECT_EQ(r.overlaps[1].first, 37);
  EXPECT_GT(r.overlaps[1].second.sequential, 0);
}

TEST(CpuAdamContest, NoContendersSayWhyEverywhere) {
  CpuAdamContest contest = tiny_contest();
  contest.sizes = {100};
  contest.copies = {false};
  const CpuAdamContestResults r = run_cpu_adam_contest(
      contest, [](unsigned) { return std::make_unique<NoContenders>("not run (--no-torch)"); });
  EXPECT_EQ(r.deepspeed, "not run (--no-torch)");
  ASSERT_EQ(r.cases.size(), 1u);
  EXPECT_EQ(r.cases[0].figures.size(), 1u);  // memwall's
  for (const std::string& name : kAdamContenders) {
    EXPECT_EQ(r.cases[0].why.at(name), "not run (--no-torch)") << name;
  }
}

}  // namespace
}  // namespace memwall::runtime
