// Exact checks of the checkpointing builder and the Chen et al. planners on
// hand-built chains, where every recomputation can be counted by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "chain.h"
#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/plan/builders.h"
#include "memwall/remat/checkpoints.h"
#include "memwall/remat/remat.h"
#include "memwall/sim/simulator.h"
#include "remat_test_util.h"

namespace memwall {
namespace {

using testing::chain_graph;

SimResult simulate_unlimited(const Graph& graph, Plan plan) {
  plan.budget = kMaxBytes;
  return simulate(graph, plan, gpu());
}

std::vector<std::string> recomputed_ops(const Graph& graph, const Plan& plan) {
  std::vector<std::string> names;
  for (const Step& step : plan.steps) {
    if (step.kind == StepKind::kRecompute) names.push_back(graph.ops[step.op].name);
  }
  return names;
}

// Buffers the plan frees before the backward begins and brings back.
std::set<std::string> kept_saved(const Graph& graph, const Plan& plan) {
  const std::vector<uint8_t> saved = saved_for_backward(graph);
  std::set<OpId> recomputed;
  for (const Step& step : plan.steps) {
    if (step.kind == StepKind::kRecompute) recomputed.insert(step.op);
  }
  const BufferUses uses(graph);
  std::set<std::string> kept;
  for (const Buffer& b : graph.buffers) {
    if (saved[b.id] && !recomputed.contains(uses.producer(b.id))) kept.insert(b.name);
  }
  return kept;
}

TEST(RematChain, CandidatesAreEveryLayerOutput) {
  const Graph graph = chain_graph(16);
  validate(graph);
  const std::vector<BufferId> candidates = candidate_checkpoints(graph);
  ASSERT_EQ(candidates.size(), 16u);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(graph.buffers[candidates[i]].name, fmt::format("y{}", i));
}

TEST(RematChain, KeepEverythingIsTheDefaultPlan) {
  const Graph graph = chain_graph(8);
  const std::vector<uint8_t> keep(graph.buffers.size(), 1);
  EXPECT_EQ(plan_with_checkpoints(graph, keep, "a100-80g", 1000),
            default_plan(graph, "a100-80g", 1000));
  EXPECT_THROW(plan_with_checkpoints(graph, std::vector<uint8_t>(3, 1), "a100-80g", 1000), Error);
}

TEST(RematChain, NoCheckpointRecomputesTheWholeForwardOncePerNeed) {
  // Nothing kept: the backward of f_i needs y_{i-1}, recomputed from x each
  // time; what a recompute brings back stays until its last use, so the
  // first backward op recomputes f0..f14 once and the later ones need nothing.
  const Graph graph = chain_graph(16);
  const std::vector<uint8_t> keep(graph.buffers.size(), 0);
  const Plan plan = plan_with_checkpoints(graph, keep, "a100-80g", kMaxBytes);
  const std::vector<std::string> recomputed = recomputed_ops(graph, plan);
  ASSERT_EQ(recomputed.size(), 16u);  // f0..f15 (loss.bwd needs y15 first)
  EXPECT_EQ(recomputed.front(), "f0");
  EXPECT_EQ(recomputed.back(), "f15");
  EXPECT_TRUE(simulate_unlimited(graph, plan).valid);
}

// Just below the default schedule's peak: with room for it, chen-sqrt keeps
// everything (Note [Keep-all first]; RematChain.ChenSqrtWithRoomKeepsEverything).
uint64_t below_keep_all(const Graph& graph) {
  return device_peak(simulate_unlimited(graph, default_plan(graph, "a100-80g", 0))) - 1;
}

TEST(RematChain, ChenSqrtKeepsFourOfSixteen) {
  const Graph graph = chain_graph(16);
  const RematResult result = plan_chen_sqrt(graph, gpu(), below_keep_all(graph), {});
  EXPECT_EQ(result.planner, "chen-sqrt");
  EXPECT_EQ(kept_saved(graph, result.plan), (std::set<std::string>{"y3", "y7", "y11", "y15"}));
  // Segments end in their checkpoint; each segment's other three layers are
  // recomputed once: f0-f2, f4-f6, f8-f10, f12-f14, in backward order.
  const std::vector<std::string> recomputed = recomputed_ops(graph, result.plan);
  EXPECT_EQ(recomputed, (std::vector<std::string>{"f12", "f13", "f14", "f8", "f9", "f10", "f4",
                                                  "f5", "f6", "f0", "f1", "f2"}));
  double expected_flops = 0;
  for (const int i : {0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14}) expected_flops += 1000.0 * (i + 1);
  EXPECT_EQ(recomputed_flops(graph, result.plan), expected_flops);

  // Memory: the default plan holds all 16 activations at the turn from
  // forward to backward; checkpointing holds 4, plus one segment's 3.
  const SimResult keep_all = simulate_unlimited(graph, default_plan(graph, "a100-80g", 0));
  const SimResult sqrt = simulate_unlimited(graph, result.plan);
  ASSERT_TRUE(sqrt.valid) << sqrt.reason;
  EXPECT_LT(device_peak(sqrt), device_peak(keep_all));
  EXPECT_LE(device_peak(sqrt), 8 + (4 + 3 + 2) * 100u);
}

TEST(RematChain, ChenSqrtRoundsTheStride) {
  // 10 candidates: stride round(sqrt(10)) = 3, keeps y2, y5, y8.
  const Graph graph = chain_graph(10);
  const RematResult result = plan_chen_sqrt(graph, gpu(), below_keep_all(graph), {});
  EXPECT_EQ(kept_saved(graph, result.plan), (std::set<std::string>{"y2", "y5", "y8"}));
}

TEST(RematChain, ChenSqrtWithRoomKeepsEverything) {
  const Graph graph = chain_graph(16);
  const RematResult result = plan_chen_sqrt(graph, gpu(), below_keep_all(graph) + 1, {});
  EXPECT_TRUE(recomputed_ops(graph, result.plan).empty()) << result.note;
}

TEST(RematChain, ChenGreedyWithRoomKeepsEverything) {
  const Graph graph = chain_graph(16);
  const SimResult keep_all = simulate_unlimited(graph, default_plan(graph, "a100-80g", 0));
  const RematResult result = plan_chen_greedy(graph, gpu(), device_peak(keep_all), {});
  EXPECT_TRUE(recomputed_ops(graph, result.plan).empty()) << result.note;
}

TEST(RematChain, ChenGreedyFitsATighterBudgetOrSaysHowLowItGets) {
  const Graph graph = chain_graph(16);
  const SimResult keep_all = simulate_unlimited(graph, default_plan(graph, "a100-80g", 0));
  const uint64_t budget = device_peak(keep_all) / 2;
  const RematResult result = plan_chen_greedy(graph, gpu(), budget, {});
  const SimResult sim = simulate(graph, result.plan, gpu());
  ASSERT_TRUE(sim.valid) << sim.reason;
  EXPECT_LE(device_peak(sim), budget);
  EXPECT_FALSE(recomputed_ops(graph, result.plan).empty());
  try {
    plan_chen_greedy(graph, gpu(), 100, {});
    ADD_FAILURE() << "a 100-byte budget cannot hold two activations";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lowest peak"), std::string::npos) << e.what();
  }
}

TEST(RematChain, FixedPlannersRefuseABudgetTheyDoNotFit) {
  const Graph graph = chain_graph(16);
  try {
    plan_chen_sqrt(graph, gpu(), 100, {});
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chen-sqrt: needs"), std::string::npos) << e.what();
  }
}

TEST(RematRegistry, NamesAreUniqueAndFound) {
  std::set<std::string> names;
  for (const RematPlanner& p : remat_planners()) {
    EXPECT_TRUE(names.insert(std::string(p.name)).second) << p.name;
    EXPECT_EQ(find_remat_planner(p.name), &p);
    EXPECT_FALSE(p.summary.empty());
    ASSERT_NE(p.fn, nullptr);
  }
  for (const char* name : {"keep-all", "per-layer", "selective", "chen-sqrt", "chen-greedy"}) {
    EXPECT_NE(find_remat_planner(name), nullptr) << name;
  }
  EXPECT_EQ(find_remat_planner("nonesuch"), nullptr);
}

}  // namespace
}  // namespace memwall
