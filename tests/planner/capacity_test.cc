// Capacity searches and throughput (src/planner/capacity.cc,
// src/sim/throughput.cc): --max-batch finds the batch with the best throughput,
// checked against every batch on small models (Note [Batch search]); with
// `largest` the largest batch that plans; both stop at their time limit;
// --max-model tries a family from its largest member; throughput figures
// follow their definitions (Note [Throughput]).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/models/zoo.h"
#include "memwall/planner/planner.h"
#include "test_util.h"

namespace memwall {
namespace {

void expect_valid_within_budget(const Candidate& c, const Hardware& hw, uint64_t budget) {
  ASSERT_TRUE(c.fits) << c.why;
  const SimResult sim = simulate(c.graph, c.plan, hw);
  ASSERT_TRUE(sim.valid) << sim.reason;
  EXPECT_LE(sim.peak_bytes[0], budget);
  EXPECT_DOUBLE_EQ(sim.iteration_time, c.sim.iteration_time);
}

struct Case {
  const char* model;
  ModelOptions base;
  uint64_t budget;
  int64_t limit;
};

// Small models on budgets where memory binds within a few dozen batches,
// so that every batch up to the limit can be planned. gpt2-small at 2.5 GB
// is not unimodal: it peaks at batch 8 (Capuchin swapping activations),
// then drops by four fifths at 9, where the optimizer must move to the
// host, and rises again; bert-base peaks at 23, one below the limit;
// MobileNetV2 still rises at the limit.
const Case kCases[] = {
    {"gpt2-small", {.seq = 128}, 2'500'000'000, 24},
    {"bert-base", {.seq = 64}, 2'200'000'000, 24},
    {"mobilenetv2", {.image = 64}, 300'000'000, 40},
};

// Samples per second per rank of every batch 1..limit; -1: no plan.
std::map<int64_t, double> every_batch(const Case& c, const Hardware& hw,
                                      const PlannerOptions& options) {
  std::map<int64_t, double> rate;
  for (int64_t batch = 1; batch <= c.limit; ++batch) {
    ModelOptions mo = c.base;
    mo.batch = batch;
    try {
      const AutoPlan a = plan_auto(build_model(c.model, mo), hw, options);
      rate[batch] = static_cast<double>(batch) / a.best.sim.iteration_time;
    } catch (const Error&) {
      rate[batch] = -1;
    }
  }
  return rate;
}

TEST(MaxBatch, FindsTheBestThroughputOfEveryBatch) {
  const Hardware& hw = find_gpu("rtx4090");
  for (Case c : kCases) {
    // Note [Zoo sweeps under sanitizers]: there gpt2-small alone, the curve
    // with the drop at batch 9, up to batch 12.
    if (kAsan || kTsan) {
      if (std::string(c.model) != kCases[0].model) continue;
      c.limit = 12;
    }
    SCOPED_TRACE(c.model);
    // A limit no plan here reaches, so both passes plan each batch alike.
    const PlannerOptions options{.budget = c.budget, .time_limit = search_seconds(10)};
    const std::map<int64_t, double> rate = every_batch(c, hw, options);
    int64_t best = 1;
    for (const auto& [batch, r] : rate) {
      if (r > rate.at(best) * (1 + 1e-6)) best = batch;
    }
    int calls = 0;
    const MaxBatch m =
        max_batch(c.model, c.base, hw, options,
                  {.batch_limit = c.limit, .progress = [&](const CapacityTry&) { ++calls; }});
    std::string curve;
    for (const auto& [batch, r] : rate) curve += fmt::format(" {}:{:.4g}", batch, r);
    // Note [Batch search] promises the best batch under unimodality, else
    // the best it tried. The device chunk search's bisection quantizes the
    // share kept on the device, which leaves bumps under 1% in the curve
    // (gpt2-small: 383.0 samples/s at batch 9, 377.3 at 10, 384.8 at 11).
    EXPECT_GE(rate.at(m.batch), 0.99 * rate.at(best))
        << "best batch " << best << ", found " << m.batch << "; throughput by batch:" << curve;
    double chosen = 0;
    for (const CapacityTry& t : m.tried) {
      if (t.batch == m.batch) chosen = t.samples_per_s;
    }
    for (const CapacityTry& t : m.tried) {
      if (t.plans) {
        EXPECT_LE(t.samples_per_s, chosen * (1 + 1e-6)) << t.batch;
      }
    }
    EXPECT_FALSE(m.cut_short);
    EXPECT_EQ(calls, static_cast<int>(m.tried.size()));
    // O(log limit) plans, far fewer than every batch: at most log2(limit)
    // + 1 doublings and two probes per halving of the bracket.
    EXPECT_LE(m.tried.size(), 3 * static_cast<size_t>(std::ceil(std::log2(c.limit))) + 1) << curve;
    for (const CapacityTry& t : m.tried) {
      EXPECT_EQ(t.plans, rate.at(t.batch) >= 0) << t.batch;
      if (t.plans) {
        // memwall's checkpoint search runs for a fixed wall time
        // (search_seconds in remat/memwall.cc), so two plans of one batch
        // can differ once the device chunk search calls it: under 0.1% on
        // the development machine, 2.3% (gpt2-small b11, 377.1 against
        // 368.8 samples/s) on a host half as fast with the suite running
        // beside it (2026-11-29).
        EXPECT_NEAR(t.samples_per_s, rate.at(t.batch), 0.05 * rate.at(t.batch)) << t.batch;
      }
    }
    expect_valid_within_budget(m.plan.best, hw, c.budget);
  }
}

// --largest: the largest batch that plans, and the next does not.
TEST(MaxBatch, LargestIsTheLargestThatPlans) {
  const Hardware& hw = find_gpu("rtx4090");
  const PlannerOptions options{.budget = 800'000'000, .time_limit = search_seconds(1)};
  const ModelOptions base{.seq = 128};
  const MaxBatch m =
      max_batch("gpt2-small", base, hw, options, {.largest = true, .batch_limit = 32});
  ASSERT_GE(m.batch, 1);
  ASSERT_LT(m.batch, 32);
  EXPECT_EQ(m.first_failing, m.batch + 1);
  EXPECT_FALSE(m.why.empty());
  ModelOptions next = base;
  next.batch = m.batch + 1;
  EXPECT_THROW(plan_auto(build_model("gpt2-small", next), hw, options), Error);
  expect_valid_within_budget(m.plan.best, hw, options.budget);
}

// A time limit shorter than one plan: batch 1 is planned, then the search
// stops with it and says so.
TEST(MaxBatch, StopsAtItsTimeLimitWithTheBestSoFar) {
  const Hardware& hw = find_gpu("rtx4090");
  const PlannerOptions options{.budget = 800'000'000, .time_limit = search_seconds(1)};
  for (const bool largest : {false, true}) {
    const MaxBatch m = max_batch("gpt2-small", {.seq = 128}, hw, options,
                                 {.largest = largest, .time_limit = 1e-9, .batch_limit = 32});
    EXPECT_TRUE(m.cut_short);
    ASSERT_EQ(m.tried.size(), 1u);
    EXPECT_EQ(m.batch, 1);
    EXPECT_NE(m.stopped.find("time limit"), std::string::npos) << m.stopped;
  }
  EXPECT_THROW(max_batch("gpt2-small", {.seq = 128}, hw, options, {.time_limit = 0}), Error);
}

TEST(MaxModel, TriesTheFamilyFromTheLargest) {
  const Hardware& hw = find_gpu("rtx4090");
  int calls = 0;
  // 10 s: under ASan on a 2-vCPU EPYC, the remat single alone takes 1.8 s to
  // conclude on gpt2-xl, and at 1 s it left no time for the techniques that fit.
  const MaxModel m =
      max_model("gpt2", {.batch = 1, .seq = 128}, hw, {.time_limit = search_seconds(10)},
                {.progress = [&](const CapacityTry&) { ++calls; }});
  EXPECT_EQ(m.model, "gpt2-xl");  // it plans with offloading
  ASSERT_EQ(m.tried.size(), 1u);
  EXPECT_EQ(calls, 1);
  EXPECT_THROW(max_model("no-such-family", {}, hw, {}, {}), Error);
}

// With the first member failing and no time left, it stops and says so.
TEST(MaxModel, StopsAtItsTimeLimit) {
  const Hardware& hw = find_gpu("rtx4090");
  const PlannerOptions tiny{.budget = 100'000'000, .time_limit = search_seconds(1)};
  try {
    max_model("gpt2", {.batch = 1, .seq = 128}, hw, tiny, {.time_limit = 1e-9});
    FAIL() << "gpt2-xl does not plan in 100 MB";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("time limit of 1e-09 s ran out after 1 of"),
              std::string::npos)
        << e.what();
  }
}

// Note [Throughput] on a hand-checked case: gpt2-small, batch 4, seq 1024.
TEST(Throughput, FollowsItsDefinitions) {
  const Hardware& hw = find_gpu("a100-80g");
  const Graph g = build_model("gpt2-small", {.batch = 4, .seq = 1024});
  double flops = 0;
  for (const Op& op : g.ops) {
    if (op.phase == Phase::kForward || op.phase == Phase::kBackward) flops += op.flops;
  }
  const Throughput t = plan_throughput(g, 0.5, hw, 8);
  EXPECT_EQ(t.batch, 4);
  EXPECT_EQ(t.seq, 1024);
  EXPECT_DOUBLE_EQ(t.samples_per_s, 8 * 4 / 0.5);
  EXPECT_DOUBLE_EQ(t.tokens_per_s, 8 * 4 * 1024 / 0.5);
  EXPECT_DOUBLE_EQ(t.model_flops, flops);
  EXPECT_EQ(t.dtype, DType::kBF16);  // mixed precision: the matmuls are bf16
  EXPECT_DOUBLE_EQ(t.peak_flops, hw.peak_flops_bf16);
  EXPECT_DOUBLE_EQ(t.mfu, flops / (0.5 * hw.peak_flops_bf16));
  // PaLM's 6N per token for the parameter matmuls (Chowdhery et al. 2022,
  // Appendix B) is a lower bound on a graph's count, which adds attention.
  EXPECT_GT(t.model_flops, 6.0 * 124'439'808 * 4 * 1024 * 0.9);
  EXPECT_THROW(plan_throughput(g, 0, hw, 1), Error);
  Graph anonymous = g;
  anonymous.meta = nlohmann::json::object();
  const Throughput u = plan_throughput(anonymous, 0.5, hw, 1);
  EXPECT_EQ(u.samples_per_s, 0);
  EXPECT_DOUBLE_EQ(u.iterations_per_s, 2);
}

}  // namespace
}  // namespace memwall
