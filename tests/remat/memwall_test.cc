// memwall's own planner (src/remat/memwall*.cc): it fits wherever any
// baseline fits, is never slower than the best of them, matches the
// exhaustive optimum of its keep-set space on small chains and Checkmate
// where CBC proves optimality, and says what holds the floor: a budget
// reached, beside a proven lower bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "../../src/remat/memwall_search.h"
#include "memwall/base/error.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/plan/builders.h"
#include "memwall/remat/checkpoints.h"
#include "memwall/remat/remat.h"
#include "memwall/sim/simulator.h"
#include "remat_graphs.h"
#include "test_util.h"

namespace memwall {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Outcome {
  bool fits = false;
  double time = kInf;
  uint64_t peak = 0;
};

Outcome run(const RematPlanner& planner, const Graph& graph, const Hardware& hw, uint64_t budget,
            const RematOptions& options = {.time_limit = 2}) {
  Outcome outcome;
  try {
    const RematResult r = planner.fn(graph, hw, budget, options);
    const SimResult sim = simulate(graph, r.plan, hw, {.record_curves = false});
    EXPECT_TRUE(sim.valid) << planner.name << ": " << sim.reason;
    outcome.peak = sim.peak_bytes[static_cast<int>(Tier::kDevice)];
    EXPECT_LE(outcome.peak, budget) << planner.name;
    outcome.fits = sim.valid && outcome.peak <= budget;
    outcome.time = sim.iteration_time;
  } catch (const Error& e) {
    EXPECT_TRUE(std::string(e.what()).starts_with(std::string(planner.name) + ":")) << e.what();
  }
  return outcome;
}

uint64_t keep_all_peak(const Graph& graph, const Hardware& hw) {
  return simulate(graph, default_plan(graph, hw.name, kMaxBytes), hw).peak_bytes[0];
}

// The property the issue asks of memwall's planner, on every zoo model small
// enough for the suite: from its floor to the keep-all peak, it fits at
// every budget where any baseline does, and its simulated iteration is no
// longer than the best baseline's. Checkmate is left to the tests below
// (its time limit would dominate the suite), and so is memwall's use of it
// below the floor of its other proposers (Note [Checkmate as a proposer]).
TEST(Memwall, NeverWorseThanAnyBaselineOnTheZoo) {
  const Hardware& hw = find_gpu("a100-80g");
  const RematPlanner* memwall = find_remat_planner("memwall");
  ASSERT_NE(memwall, nullptr);
  for (const ModelInfo& info : model_zoo()) {
    if (info.param_count > 1'000'000'000) continue;  // parameters hold their peak
    if (!in_sanitizer_sweep(info.name)) continue;    // Note [Zoo sweeps under sanitizers]
    ModelOptions options{.batch = 2};
    if (info.family == ModelFamily::kCnn) {
      options.image = 64;
    } else {
      options.seq = 128;
    }
    const Graph graph = build_model(info.name, options);
    if (graph.ops.size() > 2000) continue;
    const uint64_t top = keep_all_peak(graph, hw);
    const RematFloor floor = remat_floor(graph, hw, {.memwall_checkmate_below_floor = false});
    ASSERT_LE(floor.bytes, top) << info.name;
    for (const double f : {0.0, 0.3, 0.7, 0.95}) {
      const uint64_t budget =
          floor.bytes + static_cast<uint64_t>(f * static_cast<double>(top - floor.bytes));
      SCOPED_TRACE(fmt::format("{} budget {}", info.name, budget));
      const Outcome mine = run(*memwall, graph, hw, budget,
                               {.time_limit = 2, .memwall_checkmate_below_floor = false});
      EXPECT_TRUE(mine.fits) << "memwall must fit at and above its floor";
      for (const RematPlanner& baseline : remat_planners()) {
        if (baseline.name == "memwall" || baseline.name == "checkmate") continue;
        const Outcome theirs = run(baseline, graph, hw, budget);
        if (!theirs.fits) continue;
        EXPECT_LE(mine.time, theirs.time * (1 + 1e-12)) << "slower than " << baseline.name;
      }
    }
  }
}

// Issue 45: `memwall plan --model vgg19 --gpu v100-16g --dtype fp32 --batch
// 326 --strategy remat:memwall` said the lowest budget it reaches was 17.92
// GiB (19,244,762,496 B, the op-level search's), while `--strategy
// remat:checkmate` planned within the GPU's 16 GiB at a peak of 15.20 GiB.
// No proposer got lower: the op-level search recomputes a dropped segment
// once, DTR recomputed features.1 only when op 109 asked for it, beside op
// 108's 3.9 GiB output, and Rotor's model held each stage's input until
// the stage's backward ended, which rules out recomputing the first block
// twice as Checkmate's schedule does (Note [Inputs freed after their last
// forward]). Checkmate gets 2 CPU seconds: it found its plan after 0.7-0.8.
TEST(Memwall, Vgg19AtBatch326ReachesBelowCheckmatesPlan) {
  const Hardware& hw = find_gpu("v100-16g");
  const Graph graph =
      build_model("vgg19", {.batch = 326, .image = 224, .precision = Precision::kFp32});
  const uint64_t gpu = hw.device_memory_bytes;  // the remat strategies' default budget
  ASSERT_EQ(gpu, uint64_t{16} << 30);
  const RematResult checkmate =
      plan_checkmate(graph, hw, gpu, {.time_limit = search_seconds(30), .cpu_time_limit = 2});
  const RematFloor floor = remat_floor(graph, hw, {});
  EXPECT_LE(floor.bytes, checkmate.simulated_peak);
  // 14.07 GiB, Rotor's plan on 28 stages with inputs freed; the paper's
  // model needs at least 18,670,398,736 B there (its error message).
  EXPECT_EQ(floor.bytes, 15'108'190'592u) << floor.why;
  EXPECT_NE(floor.why.find("(memwall-rotor: 28 stages"), std::string::npos) << floor.why;
  // Within the GPU, and at Checkmate's own peak, it plans no slower.
  for (const uint64_t budget : {gpu, checkmate.simulated_peak}) {
    const Outcome mine =
        run(*find_remat_planner("memwall"), graph, hw, budget, {.time_limit = search_seconds(10)});
    ASSERT_TRUE(mine.fits) << budget;
    EXPECT_LE(mine.time, checkmate.simulated_time) << budget;
  }
}

// memwall's planner against Checkmate given the same CPU second of CBC as
// its proposer gets (Note [Checkmate as a proposer]): wherever Checkmate
// plans, from below the floor to well above it, memwall's planner plans,
// no slower, and its floor is no higher than Checkmate's plan's peak. On
// vgg16 b2 i64 Checkmate planned one byte below the floor of the other
// proposers (peak 2,217,476,864 B against the op-level search's
// 2,217,886,720 B), where memwall's planner found nothing before it ran
// Checkmate on graphs above 100 ops; with the floor's probe at 1 CPU
// second, an ASan run once found 2,217,100,288 B there, which the probe,
// at its 2 seconds now, reaches in the floor.
TEST(Memwall, NeverWorseThanCheckmateOnTheZoo) {
  const Hardware& hw = find_gpu("a100-80g");
  int compared = 0;
  for (const char* model : {"vgg16", "mobilenetv2", "gpt2-small"}) {
    const bool cnn = find_model(model).family == ModelFamily::kCnn;
    ModelOptions options{.batch = 2};
    (cnn ? options.image : options.seq) = cnn ? 64 : 128;
    const Graph graph = build_model(model, options);
    const uint64_t top = keep_all_peak(graph, hw);
    const RematFloor floor = remat_floor(graph, hw, {.time_limit = search_seconds(10)});
    for (const uint64_t budget : {floor.bytes - 1, floor.bytes + (top - floor.bytes) / 10,
                                  floor.bytes + (top - floor.bytes) * 3 / 10,
                                  floor.bytes + (top - floor.bytes) / 2}) {
      SCOPED_TRACE(fmt::format("{} budget {}", model, budget));
      RematResult theirs;
      try {
        theirs = plan_checkmate(graph, hw, budget,
                                {.time_limit = search_seconds(30), .cpu_time_limit = 1});
      } catch (const Error&) {
        continue;  // CBC found nothing in its second
      }
      ++compared;
      EXPECT_LE(floor.bytes, theirs.simulated_peak);
      const Outcome mine = run(*find_remat_planner("memwall"), graph, hw, budget,
                               {.time_limit = search_seconds(10)});
      ASSERT_TRUE(mine.fits);
      EXPECT_LE(mine.time, theirs.simulated_time * (1 + 1e-12));
    }
  }
  // Below the floor Checkmate's second found nothing on any of the three
  // in the Release build (the floor's own 2-second probe had its plan).
  // Above it, what one CPU second finds varies from run to run: 4 or 5 of
  // the 9 budgets in Release here, two copies of the test side by side
  // (CI once found 2 of the 6 without the 50% ones, mostly at 30% and 50%).
  // Under a sanitizer the model CBC solves is built 3-5x slower and its
  // one CPU second finds fewer plans.
  EXPECT_GE(compared, kAsan || kTsan ? 1 : 3);
}

// The floor is a budget reached, not a minimum claimed (Note [Floor
// search]): its plan, re-simulated, peaks exactly there; the planner fits
// there; the proven bound is below it; and a budget under the bound is
// refused as impossible, naming the op that needs it.
TEST(Memwall, TheFloorIsReachedAndTheBoundIsProven) {
  const Hardware& hw = find_gpu("a100-80g");
  const Graph graph = build_model("gpt2-small", {.batch = 2, .seq = 128});
  const RematFloor floor = remat_floor(graph, hw, {});
  EXPECT_TRUE(floor.why.starts_with("peak at op ")) << floor.why;
  EXPECT_NE(floor.why.find("optim_state"), std::string::npos) << floor.why;
  ASSERT_EQ(floor.plan.budget, floor.bytes);
  const SimResult reached = simulate(graph, floor.plan, hw);
  ASSERT_TRUE(reached.valid) << reached.reason;
  EXPECT_EQ(device_peak(reached), floor.bytes);
  const RematResult at_floor = plan_memwall(graph, hw, floor.bytes, {});
  EXPECT_LE(simulate(graph, at_floor.plan, hw).peak_bytes[0], floor.bytes);

  EXPECT_EQ(floor.bound.bytes, remat_lower_bound(graph).bytes);
  EXPECT_LE(floor.bound.bytes, floor.bytes);
  try {
    plan_memwall(graph, hw, floor.bound.bytes - 1, {});
    FAIL() << "no plan fits below the proven bound";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.starts_with("memwall: no plan can fit a budget of ")) << what;
    EXPECT_NE(what.find(fmt::format("{} bytes", floor.bound.bytes)), std::string::npos) << what;
    EXPECT_NE(what.find(floor.bound.why), std::string::npos) << what;
    EXPECT_EQ(what.find("minimum"), std::string::npos) << what;
  }
}

// Issue 19: the floor message read "every 1 of 0 boundaries kept" on a
// graph without boundaries and "every 2 of 1" on a forward-only graph with
// one (the search tries strides up to ceil(sqrt(k)) + 1).
TEST(Memwall, StrideFamiliesSayHowManyBoundariesAreKept) {
  using remat_detail::stride_family;
  EXPECT_EQ(stride_family(1, 0), "op-level");
  EXPECT_EQ(stride_family(2, 1), "op-level, none of 1 boundaries kept");
  EXPECT_EQ(stride_family(1, 4), "op-level, all 4 boundaries kept");
  EXPECT_EQ(stride_family(3, 4), "op-level, 1 of 4 boundaries kept (one in 3)");
  EXPECT_EQ(stride_family(3, 10), "op-level, 3 of 10 boundaries kept (one in 3)");
  EXPECT_EQ(stride_family(4, 16), "op-level, 4 of 16 boundaries kept (one in 4)");
}

// Issue 19: a graph without layer boundaries (no forward cut crossed by a
// single activation) has no stride to report; its floor message said "every
// 1 of 0 boundaries kept, all else dropped".
//   w param; f0 [w] -> [a, s]; f1 [a] -> [b]; f2 [b, s] -> [c] (the loss);
//   backward: loss.bwd [] -> [g0]; f2.bwd [g0] -> [gb];
//   f1.bwd [gb, a] -> [ga]; f0.bwd [ga] -> [gw]. a is the one activation
//   saved for backward; dropping it is the floor.
TEST(Memwall, AFloorWithoutBoundariesNamesNoStride) {
  testing::GraphMaker m("no-boundaries");
  const BufferId w = m.buffer("w", 8, BufferKind::kParam);
  const BufferId a = m.buffer("a", 4000);
  const BufferId skip = m.buffer("s", 100);
  const BufferId b = m.buffer("b", 4000);
  const BufferId c = m.buffer("c", 100);
  m.op("f0", Phase::kForward, {w}, {a, skip}, 1e9);
  m.op("f1", Phase::kForward, {a}, {b}, 1e9);
  m.op("f2", Phase::kForward, {b, skip}, {c}, 1e9);
  const BufferId g0 = m.buffer("g0", 100, BufferKind::kTemp);
  const BufferId gb = m.buffer("gb", 4000, BufferKind::kTemp);
  const BufferId ga = m.buffer("ga", 100, BufferKind::kTemp);
  const BufferId gw = m.buffer("gw", 8, BufferKind::kTemp);
  m.op("loss.bwd", Phase::kBackward, {}, {g0}, 1e8);
  m.op("f2.bwd", Phase::kBackward, {g0}, {gb}, 1e9);
  m.op("f1.bwd", Phase::kBackward, {gb, a}, {ga}, 1e9);
  m.op("f0.bwd", Phase::kBackward, {ga}, {gw}, 1e9);
  const Graph graph = m.take();
  validate(graph);
  ASSERT_TRUE(candidate_checkpoints(graph).empty());
  const Hardware& hw = find_gpu("a100-80g");
  const RematFloor floor = remat_floor(graph, hw, {});
  EXPECT_EQ(keep_all_peak(graph, hw), 8 + 4000 + 100 + 4000 + 100);  // w a s b c, at f2
  EXPECT_EQ(floor.bytes, 8 + 4000 + 100 + 4000);                     // w a s b, at f1
  EXPECT_NE(floor.why.find("(op-level, all else dropped"), std::string::npos) << floor.why;
  EXPECT_EQ(floor.why.find("boundaries"), std::string::npos) << floor.why;
}

// Where the planner finds nothing between the bound and the floor, it says
// the floor is the lowest budget it reaches, with the bound beside it, and
// never that the floor is a minimum.
TEST(Memwall, BetweenTheBoundAndTheFloorTheMessageSaysReached) {
  const Hardware& hw = find_gpu("a100-80g");
  int failures = 0;
  for (const Graph& graph : {build_model("gpt2-small", {.batch = 2, .seq = 128}),
                             build_model("resnet50", {.batch = 2, .image = 64}),
                             testing::hetero_chain({400, 100, 300, 200, 500, 100, 300, 200})}) {
    const RematFloor floor = remat_floor(graph, hw, {});
    if (floor.bytes == floor.bound.bytes) continue;  // reached the bound: a proven minimum
    const uint64_t budget = floor.bound.bytes + (floor.bytes - floor.bound.bytes) / 2;
    try {
      const RematResult r = plan_memwall(graph, hw, budget, {});
      EXPECT_LE(simulate(graph, r.plan, hw).peak_bytes[0], budget) << graph.name;
    } catch (const Error& e) {
      ++failures;
      const std::string what = e.what();
      EXPECT_NE(what.find(fmt::format("the lowest budget it reaches is {} bytes", floor.bytes)),
                std::string::npos)
          << what;
      EXPECT_NE(what.find(fmt::format("none can fit below {} bytes", floor.bound.bytes)),
                std::string::npos)
          << what;
      EXPECT_EQ(what.find("minimum"), std::string::npos) << what;
    }
  }
  EXPECT_GE(failures, 1) << "no graph exercised the message";
}

// The bound is a true lower bound: no rematerialization planner's plan, at
// any budget, peaks below it; and it grows with the batch (a larger batch
// never needs less).
TEST(Memwall, TheLowerBoundHoldsForEveryPlannerAndGrowsWithTheBatch) {
  const Hardware& hw = find_gpu("a100-80g");
  for (const char* model : {"gpt2-small", "bert-base", "resnet50"}) {
    const bool cnn = find_model(model).family == ModelFamily::kCnn;
    uint64_t previous = 0;
    for (const int64_t batch : {1, 2, 3, 4}) {
      ModelOptions options{.batch = batch};
      (cnn ? options.image : options.seq) = cnn ? 64 : 128;
      const Graph graph = build_model(model, options);
      const RematBound bound = remat_lower_bound(graph);
      SCOPED_TRACE(fmt::format("{} batch {}", model, batch));
      EXPECT_GE(bound.bytes, previous);
      previous = bound.bytes;
      const uint64_t top = keep_all_peak(graph, hw);
      EXPECT_LE(bound.bytes, top);
      for (const RematPlanner& planner : remat_planners()) {
        if (planner.name == "checkmate") continue;  // seconds per run; its plans are simulated too
        for (const double f : {0.0, 0.05, 0.2, 0.5}) {
          const uint64_t budget =
              bound.bytes + static_cast<uint64_t>(f * static_cast<double>(top - bound.bytes));
          // memwall's planner without Checkmate below its floor, as
          // Checkmate itself is left out.
          const Outcome o = run(planner, graph, hw, budget,
                                {.time_limit = 1, .memwall_checkmate_below_floor = false});
          if (o.fits) {
            EXPECT_GE(o.peak, bound.bytes) << planner.name;
          }
        }
      }
    }
  }
}

// On a small heterogeneous chain every keep set can be tried: memwall's
// plan is at least as fast as the best checkpointing plan within the budget
// (its search space), at every budget between the lowest such plan's peak
// and the keep-all peak.
TEST(Memwall, MatchesTheExhaustiveKeepSetOptimumOnASmallChain) {
  const Hardware& hw = find_gpu("a100-80g");
  const Graph graph = testing::hetero_chain({400, 100, 300, 200, 500, 100, 300, 200});
  const std::vector<uint8_t> droppable = droppable_activations(graph);
  std::vector<BufferId> candidates;
  for (BufferId b = 0; b < static_cast<BufferId>(graph.buffers.size()); ++b) {
    if (droppable[b]) candidates.push_back(b);
  }
  ASSERT_GE(candidates.size(), 8u);
  ASSERT_LE(candidates.size(), 12u);
  struct Point {
    uint64_t peak;
    double time;
  };
  std::vector<Point> points;
  for (uint32_t mask = 0; mask < (1u << candidates.size()); ++mask) {
    std::vector<uint8_t> keep(graph.buffers.size(), 1);
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (mask >> i & 1) keep[candidates[i]] = 0;
    }
    const SimResult sim = simulate(graph, plan_with_checkpoints(graph, keep, hw.name, kMaxBytes),
                                   hw, {.record_curves = false});
    ASSERT_TRUE(sim.valid) << sim.reason;
    points.push_back({sim.peak_bytes[0], sim.iteration_time});
  }
  const RematPlanner* memwall = find_remat_planner("memwall");
  std::vector<uint64_t> budgets;
  for (const Point& p : points) budgets.push_back(p.peak);
  std::sort(budgets.begin(), budgets.end());
  budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
  for (const uint64_t budget : budgets) {
    double best = kInf;
    for (const Point& p : points) {
      if (p.peak <= budget) best = std::min(best, p.time);
    }
    const Outcome mine = run(*memwall, graph, hw, budget);
    ASSERT_TRUE(mine.fits) << "budget " << budget;
    EXPECT_LE(mine.time, best * (1 + 1e-12)) << "budget " << budget;
  }
}

// Checkmate's MILP over the op graph is optimal for its cost model (the
// same op times the simulator charges); where CBC proves optimality,
// memwall's plan is within 1% of it. The floor itself is left out: there
// CBC needs seconds from scratch, and whether memwall's exact proposer (1
// CPU second, warm-started) closes the gap depends on the build: it does in
// Release, not under ASan (docs/remat-memwall.md, "Known gaps").
TEST(Memwall, WithinOnePercentOfProvenCheckmate) {
  const Hardware& hw = find_gpu("a100-80g");
  const RematPlanner* memwall = find_remat_planner("memwall");
  const RematPlanner* checkmate = find_remat_planner("checkmate");
  int proven = 0;
  for (const Graph& graph :
       {testing::hetero_chain({400, 100, 300, 200, 500, 100, 300, 200}),
        testing::hetero_chain({100, 900, 100, 900, 100, 900}),
        testing::hetero_chain({500, 400, 300, 200, 100, 200, 300, 400, 500})}) {
    const uint64_t top = keep_all_peak(graph, hw);
    const uint64_t floor = remat_floor(graph, hw, {}).bytes;
    for (const double f : {0.25, 0.5, 0.75}) {
      const uint64_t budget = floor + static_cast<uint64_t>(f * static_cast<double>(top - floor));
      SCOPED_TRACE(fmt::format("{} budget {}", graph.name, budget));
      RematResult optimal;
      try {
        optimal = checkmate->fn(graph, hw, budget, {.time_limit = 30, .cpu_time_limit = 5});
      } catch (const Error&) {
        continue;
      }
      if (!optimal.proven_optimal) continue;
      ++proven;
      const double optimal_time = simulate(graph, optimal.plan, hw).iteration_time;
      const Outcome mine = run(*memwall, graph, hw, budget);
      ASSERT_TRUE(mine.fits);
      EXPECT_LE(mine.time, optimal_time * 1.01);
    }
  }
  EXPECT_GE(proven, 6) << "CBC should prove most of these small MILPs optimal";
}

}  // namespace
}  // namespace memwall
