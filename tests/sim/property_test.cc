// Property tests of the simulator on every zoo model: the default plan's
// simulated peak equals the graph's accounted peak; random valid plans are
// accepted; randomly corrupted plans are rejected with the right reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/plan/builders.h"
#include "memwall/sim/simulator.h"
#include "zoo_models.h"

namespace memwall {
namespace {

constexpr uint64_t kHuge = uint64_t{1} << 60;

// Random evictions across the largest gaps of random activations.
std::vector<Eviction> random_evictions(const Graph& graph, std::mt19937& rng) {
  const BufferUses uses(graph);
  std::vector<Eviction> evictions;
  std::bernoulli_distribution pick(0.3);
  for (const Buffer& b : graph.buffers) {
    if (b.kind != BufferKind::kActivation || !pick(rng)) continue;
    std::optional<Eviction> gap = largest_gap(uses, b.id);
    if (!gap) continue;
    const OpId producer = uses.producer(b.id);
    const bool recomputable = producer != kNoOp && graph.ops[producer].updates.empty();
    switch (std::uniform_int_distribution<int>(0, 2)(rng)) {
      case 0:
        gap->how = recomputable ? Eviction::How::kRecompute : Eviction::How::kSwap;
        break;
      case 1:
        gap->how = Eviction::How::kSwap;
        gap->to = Tier::kNvme;
        break;
      default:
        gap->how = Eviction::How::kSwap;
    }
    if (gap->how == Eviction::How::kSwap) {
      gap->prefetch_after = std::uniform_int_distribution<OpId>(gap->after, gap->before - 1)(rng);
    }
    evictions.push_back(*gap);
  }
  return evictions;
}

class ZooProperty : public ::testing::TestWithParam<std::string> {};

TEST_P(ZooProperty, DefaultPlanPeakIsTheAccountedPeak) {
  const Graph graph = small_zoo_model(find_model(GetParam()));
  const Hardware& hw = find_gpu("a100-80g");
  const SimResult r = simulate(graph, default_plan(graph, hw.name, kHuge), hw);
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.peak_bytes[0], memory_profile(graph).peak_bytes);
  EXPECT_EQ(r.peak_bytes[1], 0u);
  EXPECT_EQ(r.transfer_stall_time, 0.0);
  EXPECT_NEAR(r.iteration_time, iteration_time(hw, graph), 1e-9 * r.iteration_time);
  // Exactly the accounted peak fits; one byte less does not.
  const SimResult tight =
      simulate(graph, default_plan(graph, hw.name, memory_profile(graph).peak_bytes), hw);
  EXPECT_TRUE(tight.valid) << tight.reason;
  const SimResult short_by_one =
      simulate(graph, default_plan(graph, hw.name, memory_profile(graph).peak_bytes - 1), hw);
  EXPECT_FALSE(short_by_one.valid);
  EXPECT_NE(short_by_one.reason.find("exceeds the budget by 1 bytes"), std::string::npos)
      << short_by_one.reason;
}

TEST_P(ZooProperty, RandomValidPlansAreAccepted) {
  const Graph graph = small_zoo_model(find_model(GetParam()));
  const Hardware& hw = find_gpu("a100-80g");
  const double baseline = simulate(graph, default_plan(graph, hw.name, kHuge), hw).compute_time;
  std::mt19937 rng(std::hash<std::string>()(GetParam()));
  for (int trial = 0; trial < 4; ++trial) {
    const std::vector<Eviction> evictions = random_evictions(graph, rng);
    const Plan plan = plan_with_evictions(graph, evictions, hw.name, kHuge);
    const SimResult r = simulate(graph, plan, hw);
    ASSERT_TRUE(r.valid) << trial << ": " << r.reason;
    EXPECT_GE(r.compute_time, baseline * (1 - 1e-12));  // recomputation only adds
    // The time split adds up to the iteration (Note [Time split]).
    double split = r.compute_time;
    for (const double w : r.waiting) split += w;
    EXPECT_NEAR(split, r.iteration_time, 1e-9 * r.iteration_time) << trial;
    EXPECT_EQ(r.waiting[static_cast<size_t>(Resource::kCompute)], 0.0);
    // Everything not persistent was freed, on every tier.
    EXPECT_EQ(r.curves[1].empty() ? 0u : r.curves[1].back().bytes, 0u);
    EXPECT_EQ(r.curves[2].empty() ? 0u : r.curves[2].back().bytes, 0u);
  }
}

// Index of the first step matching `pred`, or steps.size().
template <typename Pred>
size_t find_step(const Plan& plan, Pred pred) {
  return static_cast<size_t>(std::find_if(plan.steps.begin(), plan.steps.end(), pred) -
                             plan.steps.begin());
}

TEST_P(ZooProperty, CorruptedPlansAreRejectedWithTheRightReason) {
  const Graph graph = small_zoo_model(find_model(GetParam()));
  const Hardware& hw = find_gpu("a100-80g");
  std::mt19937 rng(std::hash<std::string>()(GetParam()) + 1);
  std::vector<Eviction> evictions = random_evictions(graph, rng);
  const Plan valid = plan_with_evictions(graph, evictions, hw.name, kHuge);
  const SimResult ok = simulate(graph, valid, hw);
  ASSERT_TRUE(ok.valid) << ok.reason;
  const auto expect_reason = [&](const Plan& plan, const std::string& phrase, const char* what) {
    const SimResult r = simulate(graph, plan, hw);
    EXPECT_FALSE(r.valid) << what;
    EXPECT_NE(r.reason.find(phrase), std::string::npos) << what << ": " << r.reason;
  };

  // A swap_in removed: its reader finds the buffer swapped out (unless a
  // recompute of its producer brings it back first: skip those).
  const BufferUses uses(graph);
  const auto reads = [&](OpId op, BufferId b) {
    const Op& o = graph.ops[op];
    return std::find(o.in.begin(), o.in.end(), b) != o.in.end() ||
           std::find(o.updates.begin(), o.updates.end(), b) != o.updates.end();
  };
  size_t swap_in = valid.steps.size();
  for (size_t k = 0; k < valid.steps.size() && swap_in == valid.steps.size(); ++k) {
    if (valid.steps[k].kind != StepKind::kSwapIn) continue;
    const BufferId b = valid.steps[k].buf;
    for (size_t j = k + 1; j < valid.steps.size(); ++j) {
      const Step& s = valid.steps[j];
      if (s.op < 0) continue;
      if (s.kind == StepKind::kRecompute && s.op == uses.producer(b)) break;
      if (reads(s.op, b)) {
        swap_in = k;
        break;
      }
    }
  }
  if (swap_in < valid.steps.size()) {
    Plan plan = valid;
    plan.steps.erase(plan.steps.begin() + static_cast<std::ptrdiff_t>(swap_in));
    expect_reason(plan, "which is not on the device: it was swapped out at step", "no swap_in");
  }
  // A buffer freed right after its producer, though read later.
  for (const Buffer& b : graph.buffers) {
    const OpId producer = uses.producer(b.id);
    if (producer == kNoOp || uses.of(b.id).empty()) continue;
    Plan plan = valid;
    const size_t at = find_step(
        plan, [&](const Step& s) { return s.kind == StepKind::kCompute && s.op == producer; });
    plan.steps.insert(plan.steps.begin() + static_cast<std::ptrdiff_t>(at + 1), Step::free(b.id));
    expect_reason(plan, "it was freed at step " + std::to_string(at + 1), "early free");
    break;
  }
  // An op computed twice.
  {
    Plan plan = valid;
    const size_t at = find_step(plan, [](const Step& s) { return s.kind == StepKind::kCompute; });
    plan.steps.insert(plan.steps.begin() + static_cast<std::ptrdiff_t>(at + 1), plan.steps[at]);
    expect_reason(plan, "is computed a second time", "duplicate compute");
  }
  // The last op (an optimizer step) dropped.
  {
    Plan plan = valid;
    const size_t at = find_step(plan, [&](const Step& s) {
      return s.kind == StepKind::kCompute && s.op == static_cast<OpId>(graph.ops.size() - 1);
    });
    plan.steps.erase(plan.steps.begin() + static_cast<std::ptrdiff_t>(at));
    expect_reason(plan, "end of plan: op " + std::to_string(graph.ops.size() - 1), "missing op");
  }
  // One byte less than the simulated peak.
  {
    Plan plan = valid;
    plan.budget = ok.peak_bytes[0] - 1;
    expect_reason(plan, "exceeds the budget by 1 bytes", "budget");
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, ZooProperty, ::testing::ValuesIn(zoo_model_names()), zoo_test_name);

}  // namespace
}  // namespace memwall
