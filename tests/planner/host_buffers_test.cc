// The published baselines' host memory (Note [Host buffers of the published
// systems] in src/swap/deepspeed_buffers.cc) in the planner: the single
// techniques zero-offload and zero-infinity reserve DeepSpeed's buffers,
// memwall's own plans do not, and --nvme none (PlannerOptions::no_nvme)
// keeps everything off NVMe.
#include "memwall/planner/planner.h"

#include <gtest/gtest.h>

#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/plan/plan.h"
#include "test_util.h"

namespace memwall {
namespace {

constexpr size_t kHostTier = static_cast<size_t>(Tier::kHost);
constexpr size_t kNvmeTier = static_cast<size_t>(Tier::kNvme);

// GPT-2 small's 124,439,808 parameters (Hugging Face's gpt2), each with an
// fp32 gradient on the host for DeepSpeed's CPU Adam.
constexpr uint64_t kGpt2Params = 124'439'808;

TEST(HostBuffers, ZeroOffloadReservesDeepSpeedsFp32Gradients) {
  const Graph g = build_model("gpt2-small", {.batch = 1, .seq = 128});
  const Hardware& hw = find_gpu("a100-80g");
  const PlannerOptions options{.time_limit = search_seconds(2)};
  const Candidate c = plan_single_technique(g, hw, options, "zero-offload");
  ASSERT_TRUE(c.fits) << c.why;
  ASSERT_EQ(c.plan.host_reserved.size(), 2u);
  EXPECT_EQ(c.plan.host_reserved[0].bytes, 4 * kGpt2Params);
  // The master weights, momentum and variance (12 bytes a parameter) and
  // the reserve are on the host together.
  EXPECT_GE(c.sim.peak_bytes[kHostTier], 12 * kGpt2Params + host_reserved_bytes(c.plan));
  // memwall's own plans step the 16-bit gradients they moved: no reserve.
  const AutoPlan a = plan_auto(g, hw, options);
  ASSERT_TRUE(a.best.fits) << a.best.why;
  EXPECT_TRUE(a.best.plan.host_reserved.empty());
}

// ZeRO-Infinity's CPU-only configuration: both states on the host, nothing
// on NVMe, DeepSpeed's fp32 gradients reserved. On a host that holds the
// states but not the reserve beside them it does not fit, and the message
// names the host.
TEST(HostBuffers, InfinityWithoutNvmeOffloadsToTheCpu) {
  const Graph g = build_model("gpt2-small", {.batch = 1, .seq = 128});
  const Hardware& hw = find_gpu("a100-80g");
  PlannerOptions options{.time_limit = search_seconds(2)};
  options.no_nvme = true;
  const Candidate c = plan_single_technique(g, hw, options, "zero-infinity");
  ASSERT_TRUE(c.fits) << c.why;
  EXPECT_EQ(c.states.optimizer, Tier::kHost);
  EXPECT_EQ(c.states.params, Tier::kHost);
  EXPECT_EQ(c.sim.peak_bytes[kNvmeTier], 0u);
  ASSERT_FALSE(c.plan.host_reserved.empty());
  EXPECT_EQ(c.plan.host_reserved[0].bytes, 4 * kGpt2Params);

  PlannerOptions tight = options;
  tight.host_bytes = c.sim.peak_bytes[kHostTier] - host_reserved_bytes(c.plan) / 2;
  const Candidate over = plan_single_technique(g, hw, tight, "zero-infinity");
  EXPECT_FALSE(over.fits);
  EXPECT_NE(over.why.find("host memory exceeds"), std::string::npos) << over.why;
  // memwall's planner, with a budget below the model states (16 bytes a
  // parameter, 2.0 GB), offloads to the same host and places nothing on NVMe.
  tight.budget = 1'500'000'000;
  const AutoPlan a = plan_auto(g, hw, tight);
  ASSERT_TRUE(a.best.fits) << a.best.why;
  EXPECT_EQ(a.best.sim.peak_bytes[kNvmeTier], 0u);
  EXPECT_NE(a.best.states.optimizer, Tier::kNvme);
  EXPECT_NE(a.best.states.params, Tier::kNvme);
  EXPECT_TRUE(a.best.states.optimizer == Tier::kHost || a.best.states.params == Tier::kHost);
}

}  // namespace
}  // namespace memwall
