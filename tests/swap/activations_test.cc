// Table tests of the swap scheduler, vDNN and Capuchin on a hand-built
// chain (swap_graphs.h) whose op times and copy times are exact, so every
// decision and figure below is derived by hand in the comments.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/plan/builders.h"
#include "memwall/sim/simulator.h"
#include "memwall/swap/activations.h"
#include "swap_graphs.h"

namespace memwall {
namespace {

using testing::copy_profile;
using testing::layer_chain;
using testing::recomputes;
using testing::swaps;
using Strings = std::vector<std::string>;

constexpr int kDevice = static_cast<int>(Tier::kDevice);

SimResult run(const Graph& graph, const Plan& plan, const Hardware& hw) {
  const SimResult sim = simulate(graph, plan, hw, {.record_curves = false});
  EXPECT_TRUE(sim.valid) << sim.reason;
  return sim;
}

// The chain's figures (ops 1 s each, copies of its 100-byte activations
// 1 s each way). Keep-all holds w + x = 18 bytes throughout and peaks at
// 522 while loss.bwd (op 5) runs: y0..y3, l and g3. Swapping y0, y1 and y2
// across their forward-to-backward gaps with every prefetch just in time,
// the device holds, per op (D[j] of Note [Swap scheduling]):
//   op   0    1    2    3    4    5    6    7    8    9   10   11   12
//       118  218  218  218  122  222  318  322  318  422  318  322  122
// (a swap-out issued at op a's start lands one second later, at op a + 1's
// start; op 9 holds y1, y0 prefetched for op 10, g1, g2 and dw2).
const std::vector<Eviction> kThreeSwaps = {{.buf = 2, .after = 1, .before = 10},  // y0
                                           {.buf = 3, .after = 2, .before = 9},   // y1
                                           {.buf = 4, .after = 3, .before = 7}};  // y2

TEST(SwapScheduler, UnlimitedBudgetPrefetchesRightAfterTheSwapOut) {
  const Graph graph = layer_chain();
  const Hardware hw = copy_profile(100);
  const SwapSchedule s = schedule_swaps(graph, hw, kMaxBytes, kThreeSwaps);
  EXPECT_TRUE(s.fits);
  EXPECT_EQ(s.just_in_time_peak, 422u);
  EXPECT_EQ(swaps(graph, s.plan),
            (Strings{"y0 out after f1 in after f1", "y1 out after f2 in after f2",
                     "y2 out after f3 in after f3"}));
  EXPECT_EQ(s.sim.iteration_time, 13);
  EXPECT_EQ(s.sim.transfer_stall_time, 0);
}

// At 422 (the just-in-time peak) the memory pass gives headroom 422 - D[j]:
// 204 at ops 1-3, so y2 joining y1 and y0 at op 3 pushes y0 (needed last)
// to op 4; 300 at op 4 takes all three; 200 at op 5 pushes y0 to 6; at op 6
// y2 is in D already and y0 + y1 = 200 > 104 pushes y0 to 7, and 200 > 100
// at op 7 to 8, where y1 is in D and y0 fits in 104. y1 and y2 stay at
// their earliest points: they never leave.
TEST(SwapScheduler, BudgetDelaysThePrefetchNeededLast) {
  const Graph graph = layer_chain();
  const Hardware hw = copy_profile(100);
  for (const uint64_t budget : {uint64_t{422}, uint64_t{472}}) {
    const SwapSchedule s = schedule_swaps(graph, hw, budget, kThreeSwaps);
    EXPECT_TRUE(s.fits) << budget;
    EXPECT_EQ(swaps(graph, s.plan),
              (Strings{"y0 out after f1 in after f2.bwd_in", "y1 out after f2 in after f2",
                       "y2 out after f3 in after f3"}))
        << budget;
    EXPECT_LE(s.sim.peak_bytes[kDevice], budget);
    EXPECT_EQ(s.repairs, 0u);
    EXPECT_EQ(s.sim.transfer_stall_time, 0);
    const SimResult sim = run(graph, s.plan, hw);  // at the plan's own budget
    EXPECT_EQ(sim.iteration_time, 13);
  }
}

TEST(SwapScheduler, BelowTheJustInTimePeakNothingFits) {
  const Graph graph = layer_chain();
  const Hardware hw = copy_profile(100);
  const SwapSchedule s = schedule_swaps(graph, hw, 400, kThreeSwaps);
  EXPECT_FALSE(s.fits);
  EXPECT_EQ(s.just_in_time_peak, 422u);
  EXPECT_EQ(swaps(graph, s.plan),
            (Strings{"y0 out after f1 in after f2.bwd_w", "y1 out after f2 in after f2.bwd_in",
                     "y2 out after f3 in after f3.bwd_in"}));
}

TEST(SwapScheduler, EarliestPointAndRecomputesAreKept) {
  const Graph graph = layer_chain();
  const Hardware hw = copy_profile(100);
  const std::vector<Eviction> evictions = {
      {.buf = 2, .after = 1, .before = 10, .prefetch_after = 7},               // y0
      {.buf = 3, .after = 2, .before = 9, .how = Eviction::How::kRecompute}};  // y1
  const SwapSchedule s = schedule_swaps(graph, hw, kMaxBytes, evictions);
  EXPECT_TRUE(s.fits);
  EXPECT_EQ(swaps(graph, s.plan), (Strings{"y0 out after f1 in after f3.bwd_w"}));
  EXPECT_EQ(recomputes(graph, s.plan), (Strings{"f1"}));
  ASSERT_EQ(s.evictions.size(), 2u);
  EXPECT_EQ(s.evictions[0].how, Eviction::How::kRecompute);
  EXPECT_EQ(s.evictions[0].buf, 3);
  EXPECT_EQ(s.evictions[0].after, 2);
}

TEST(SwapScheduler, BadEvictionsAreErrors) {
  const Graph graph = layer_chain();
  const Hardware hw = copy_profile(100);
  const std::vector<Eviction> to_device = {
      {.buf = 2, .after = 1, .before = 10, .to = Tier::kDevice}};
  EXPECT_THROW(schedule_swaps(graph, hw, kMaxBytes, to_device), Error);
  const std::vector<Eviction> not_a_gap = {{.buf = 2, .after = 1, .before = 11}};
  EXPECT_THROW(schedule_swaps(graph, hw, kMaxBytes, not_a_gap), Error);
}

// vDNN offloads the forward ops' saved inputs: y0 (f1's), y1 (f2's), y2
// (f3's); y3 is loss's input but loss.bwd reads it right after. In
// backward it prefetches one offloaded layer ahead: y2 (first needed, by
// f3.bwd_w) just in time, y1 while f3.bwd_w runs, y0 while f2.bwd_w runs.
// Each 1 s copy hides under a 1 s op.
TEST(Vdnn, OffloadsEveryLayerInputAndPrefetchesOneLayerAhead) {
  const Graph graph = layer_chain();
  const Hardware hw = copy_profile(100);
  EXPECT_EQ(vdnn_offloaded(graph, false), (std::vector<BufferId>{2, 3, 4}));
  const SwapResult r = plan_vdnn(graph, hw, kMaxBytes, {});
  EXPECT_EQ(swaps(graph, r.plan),
            (Strings{"y0 out after f1 in after f2.bwd_w", "y1 out after f2 in after f3.bwd_w",
                     "y2 out after f3 in after f3.bwd_in"}));
  EXPECT_EQ(r.swapped, 3u);
  EXPECT_EQ(r.recomputed, 0u);
  EXPECT_EQ(r.bytes_swapped_out, 300u);
  EXPECT_EQ(r.simulated_time, 13);
  EXPECT_EQ(r.simulated_peak, 422u);  // op 7: w, x, g2, dw3, g3, y2 and y1
  EXPECT_EQ(r.planner, "vdnn");
  // The same plan fits its own peak; below the just-in-time peak it cannot.
  EXPECT_EQ(plan_vdnn(graph, hw, 422, {}).plan.steps, r.plan.steps);
  try {
    plan_vdnn(graph, hw, 400, {});
    ADD_FAILURE() << "vdnn fit 400 bytes";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "vdnn: needs 422 device bytes, over the budget of 400 by 22");
  }
}

TEST(Vdnn, ConvOnlyOffloadsConvolutionInputs) {
  const Graph graph = layer_chain();
  const Hardware hw = copy_profile(100);
  EXPECT_EQ(vdnn_offloaded(graph, true), (std::vector<BufferId>{3}));  // f2's y1
  const SwapResult r = plan_vdnn_conv(graph, hw, kMaxBytes, {});
  EXPECT_EQ(swaps(graph, r.plan), (Strings{"y1 out after f2 in after f2.bwd_in"}));
  EXPECT_EQ(r.planner, "vdnn-conv");
}

TEST(Vdnn, NvmeTier) {
  const Graph graph = layer_chain();
  const Hardware hw = copy_profile(100);
  const SwapResult r = plan_vdnn(graph, hw, kMaxBytes, {.tier = Tier::kNvme});
  for (const Step& step : r.plan.steps) {
    if (step.kind == StepKind::kSwapOut) {
      EXPECT_EQ(step.to, Tier::kNvme);
    }
  }
  EXPECT_GT(r.simulated_time, 13);  // NVMe legs at half the bandwidth do not all hide
  EXPECT_THROW(plan_vdnn(graph, hw, kMaxBytes, {.tier = Tier::kDevice}), Error);
}

// Budget 422 needs 100 bytes off at loss.bwd (op 5). Spanning it: y0, y1,
// y2, with free times (swap-in start - swap-out end) 9 - 2 = 7, 8 - 3 = 5
// and 6 - 4 = 2: y0 hides best. Its prefetch then goes where the memory
// allows (as in BudgetDelaysThePrefetchNeededLast): after f2.bwd_in.
TEST(Capuchin, SwapsTheLargestFreeTimeFirst) {
  const Graph graph = layer_chain();
  const Hardware hw = copy_profile(100);
  const SwapResult r = plan_capuchin(graph, hw, 422, {});
  EXPECT_EQ(swaps(graph, r.plan), (Strings{"y0 out after f1 in after f2.bwd_in"}));
  EXPECT_EQ(recomputes(graph, r.plan), Strings{});
  EXPECT_EQ(r.swapped, 1u);
  EXPECT_EQ(r.recomputed, 0u);
  EXPECT_EQ(r.simulated_peak, 422u);
  EXPECT_EQ(r.simulated_time, 13);
  EXPECT_EQ(r.planner, "capuchin");
}

// With 100 s copies no swap-out lands before op 5, so no swap lowers the
// peak; recomputing saves 100 bytes per second of its producer: f0 3 s, f1
// 0.5 s, f2 2 s, so y1 (f1's output) goes, recomputed before f2.bwd_w.
TEST(Capuchin, RecomputesWhenSwapsCannotHide) {
  const Graph graph = layer_chain({3, 0.5, 2});
  const Hardware hw = copy_profile(1);
  const SwapResult r = plan_capuchin(graph, hw, 422, {});
  EXPECT_EQ(swaps(graph, r.plan), Strings{});
  EXPECT_EQ(recomputes(graph, r.plan), (Strings{"f1"}));
  EXPECT_EQ(r.recomputed, 1u);
  EXPECT_EQ(r.simulated_peak, 422u);
  const SimResult keep = run(graph, default_plan(graph, hw.name, kMaxBytes), hw);
  EXPECT_DOUBLE_EQ(r.simulated_time, keep.iteration_time + 0.5);
}

TEST(Capuchin, SaysByHowMuchItMisses) {
  const Graph graph = layer_chain({3, 0.5, 2});
  try {
    plan_capuchin(graph, copy_profile(1), 422, {.allow_recompute = false});
    ADD_FAILURE() << "fit without recompute";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "capuchin: the lowest device peak it reaches is 522 bytes, over the budget of "
                 "422 by 100; nothing left spanning the peak at op 5 (\"loss.bwd\") lowers it");
  }
  // Swapping y0 and y1 clears op 5, but op 9 needs y1 and y0 (prefetched
  // for op 10) with g1 and g2: 422 bytes, and nothing spans op 9.
  try {
    plan_capuchin(layer_chain(), copy_profile(100), 322, {});
    ADD_FAILURE() << "fit 322";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "capuchin: the lowest device peak it reaches is 422 bytes, over the budget of "
                 "322 by 100; nothing left spanning the peak at op 9 (\"f2.bwd_w\") lowers it");
  }
}

// Note [Host, then NVMe]: the swap of y0 (100 bytes, as in
// SwapsTheLargestFreeTimeFirst) goes to the host when the host has room for
// it, and to NVMe when it has none.
TEST(Capuchin, SwapsGoToTheHostWhileItHasRoom) {
  const Graph graph = layer_chain();
  const Hardware hw = copy_profile(100);
  const auto tiers = [&](const Plan& plan) {
    Strings out;
    for (const Step& s : plan.steps) {
      if (s.kind == StepKind::kSwapOut) {
        out.push_back(graph.buffers[s.buf].name + " " + std::string(to_string(s.to)));
      }
    }
    return out;
  };
  const SwapResult room = plan_capuchin(graph, hw, 422, {.host_swap_bytes = 100});
  EXPECT_EQ(tiers(room.plan), Strings{"y0 host"});
  EXPECT_EQ(room.note, "1 swapped to host, 0 to nvme, 0 recomputed, in 1 rounds");
  const SwapResult none = plan_capuchin(graph, hw, 422, {.host_swap_bytes = 99});
  EXPECT_EQ(tiers(none.plan), Strings{"y0 nvme"});
  EXPECT_LE(none.simulated_peak, 422u);
}

TEST(Capuchin, EnoughBudgetEvictsNothing) {
  const Graph graph = layer_chain();
  const Hardware hw = copy_profile(100);
  const SwapResult r = plan_capuchin(graph, hw, 522, {});
  EXPECT_EQ(r.plan, default_plan(graph, hw.name, 522));
  EXPECT_EQ(r.note, "fits without evictions");
}

TEST(SwapRegistry, NamesAndLookup) {
  Strings names;
  for (const SwapPlanner& p : swap_planners()) names.emplace_back(p.name);
  EXPECT_EQ(names, (Strings{"vdnn", "vdnn-conv", "capuchin"}));
  ASSERT_NE(find_swap_planner("capuchin"), nullptr);
  EXPECT_EQ(find_swap_planner("capuchin")->fn, &plan_capuchin);
  EXPECT_EQ(find_swap_planner("dtr"), nullptr);
}

TEST(SwapRequireFit, NamesThePeak) {
  const Graph graph = layer_chain();
  const Hardware hw = copy_profile(100);
  const Plan plan = default_plan(graph, hw.name, 500);
  try {
    require_fit(graph, hw, plan, 500, "test");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "test: needs 522 device bytes, over the budget of 500 by 22");
  }
  EXPECT_EQ(require_fit(graph, hw, plan, 522, "test").peak_bytes[kDevice], 522u);
}

}  // namespace
}  // namespace memwall
