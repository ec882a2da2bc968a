// bitsandbytes' paged optimizer in memwall's terms (Note [Paged optimizer]
// in src/swap/offload.cc): the states live on the host, the device runs
// every step where the plan has it, each parameter's states come in just
// before its step and go back after it; exactly the states' bytes cross
// each way, and the simulator accepts the plan.
#include <gtest/gtest.h>

#include <map>

#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/plan/builders.h"
#include "memwall/sim/simulator.h"
#include "memwall/swap/offload.h"
#include "offload_test_util.h"

namespace memwall {
namespace {

using namespace offload_test;  // NOLINT(google-build-using-namespace)

const OffloadOptions kPaged{.optimizer = Tier::kHost, .paged = true};

TEST(PagedOptimizer, StatesComeInForTheirStepAndGoBackAfter) {
  const OffloadGraph og = offload_graph(gpt2(), kPaged);
  EXPECT_TRUE(og.graph.name.ends_with("(paged optimizer)"));
  // Nothing is rewritten: the steps are the graph's own (fused) device steps.
  EXPECT_EQ(og.graph.ops.size(), gpt2().ops.size());
  const Plan plan = apply_offload(og, default_plan(og.graph, "a100-40g", kMaxBytes), kPaged);
  const SimResult r = simulate(og.graph, plan, find_gpu("a100-40g"));
  ASSERT_TRUE(r.valid) << r.reason;
  uint64_t states = 0;
  for (size_t k = 0; k < og.states.size(); ++k) states += optimizer_state_bytes(og, k);
  EXPECT_GT(states, 0u);
  EXPECT_EQ(r.bytes_moved[kH2D], states);
  EXPECT_EQ(r.bytes_moved[kD2H], states);
  std::map<OpId, size_t> at;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    if (plan.steps[i].kind == StepKind::kCompute) at[plan.steps[i].op] = i;
  }
  for (const OffloadedState& o : og.states) {
    ASSERT_TRUE(o.paged && o.on_device);
    EXPECT_EQ(plan.placement.at(o.states[0]), Tier::kHost);
    const size_t i = at.at(o.step);
    EXPECT_EQ(plan.steps[i].on, Tier::kDevice);
    const size_t n = o.states.size();
    ASSERT_GE(i, n);
    ASSERT_LT(i + n, plan.steps.size());
    for (size_t j = 0; j < n; ++j) {
      EXPECT_EQ(plan.steps[i - n + j].kind, StepKind::kSwapIn);
      EXPECT_EQ(plan.steps[i - n + j].buf, o.states[j]);
      EXPECT_EQ(plan.steps[i + 1 + j].kind, StepKind::kSwapOut);
      EXPECT_EQ(plan.steps[i + 1 + j].buf, o.states[j]);
    }
  }
}

// The planning view weighs the states nothing and the gradients their
// bytes: the gradients wait for the steps after backward.
TEST(PagedOptimizer, TheViewWeighsGradientsButNotStates) {
  const OffloadGraph og = offload_graph(gpt2(), kPaged);
  const Graph view = planning_view(og, kPaged);
  for (const OffloadedState& o : og.states) {
    for (const BufferId s : o.states) EXPECT_EQ(view.buffers[s].bytes, 0u);
    EXPECT_EQ(view.buffers[o.grad].bytes, og.graph.buffers[o.grad].bytes);
    EXPECT_EQ(view.buffers[o.param].bytes, og.graph.buffers[o.param].bytes);
  }
}

TEST(PagedOptimizer, OnlyFromTheHostWithParametersOnTheDevice) {
  EXPECT_THROW(offload_graph(gpt2(), {.optimizer = Tier::kNvme, .paged = true}), Error);
  EXPECT_THROW(
      offload_graph(gpt2(), {.optimizer = Tier::kHost, .params = Tier::kHost, .paged = true}),
      Error);
}

}  // namespace
}  // namespace memwall
