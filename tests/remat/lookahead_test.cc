// memwall-lookahead (src/remat/dtr.h, Note [Lookahead] in
// src/remat/dtr_heuristics.cc): DTR's loop scored by the distance to the
// next use instead of staleness. A hand-built graph where its choice is
// known and differs from h_DTR's, and zoo models at budgets from DTR's
// lowest to the keep-all peak.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "../../src/remat/dtr.h"
#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/plan/builders.h"
#include "memwall/remat/checkpoints.h"
#include "memwall/remat/remat.h"
#include "memwall/sim/simulator.h"
#include "plan_steps.h"
#include "remat_graphs.h"
#include "remat_test_util.h"

namespace memwall {
namespace {

constexpr std::string_view kLookahead = "memwall-lookahead";
constexpr std::string_view kLookaheadEq = "memwall-lookahead-eqclass";

RematResult run_lookahead(std::string_view name, const Graph& graph, uint64_t budget) {
  if (name == kLookahead) return plan_dtr_lookahead(graph, gpu(), budget, {});
  if (name == kLookaheadEq) return plan_dtr_lookahead_eqclass(graph, gpu(), budget, {});
  const RematPlanner* planner = find_remat_planner(name);
  if (planner == nullptr) throw Error(fmt::format("no planner {}", name));
  return planner->fn(graph, gpu(), budget, {});
}

using testing::evicted;
using testing::recomputed;

using Names = std::vector<std::string>;

// x (input, 8) -> f0 -> a -> f1 -> b -> f2 -> c -> f3 -> d, then f4 reads
// d and, through a skip connection, a and b, making e; loss reads e. The
// backward: loss.bwd reads e and makes ge; f4.bwd reads ge and d only (its
// skip inputs are not needed for the gradient), f3.bwd c, f2.bwd b, f1.bwd
// a, f0.bwd x. Activations are 100 bytes, gradients ge 150, gd 100, gc 250,
// gb and ga 10; every op takes 1 s.
Graph skip_chain() {
  testing::GraphMaker m("skip-chain");
  const BufferId x = m.buffer("x", 8, BufferKind::kInput);
  const BufferId a = m.buffer("a", 100);
  const BufferId b = m.buffer("b", 100);
  const BufferId c = m.buffer("c", 100);
  const BufferId d = m.buffer("d", 100);
  const BufferId e = m.buffer("e", 100);
  const BufferId loss = m.buffer("loss", 4);
  m.op("f0", Phase::kForward, {x}, {a}, 0);
  m.op("f1", Phase::kForward, {a}, {b}, 0);
  m.op("f2", Phase::kForward, {b}, {c}, 0);
  m.op("f3", Phase::kForward, {c}, {d}, 0);
  m.op("f4", Phase::kForward, {d, a, b}, {e}, 0);
  m.op("loss", Phase::kForward, {e}, {loss}, 0);
  const auto grad = [&](const char* name, uint64_t bytes) {
    return m.buffer(name, bytes, BufferKind::kTemp);
  };
  const BufferId ge = grad("ge", 150), gd = grad("gd", 100), gc = grad("gc", 250);
  const BufferId gb = grad("gb", 10), ga = grad("ga", 10), gx = grad("gx", 8);
  m.op("loss.bwd", Phase::kBackward, {e}, {ge}, 0);
  m.op("f4.bwd", Phase::kBackward, {ge, d}, {gd}, 0);
  m.op("f3.bwd", Phase::kBackward, {gd, c}, {gc}, 0);
  m.op("f2.bwd", Phase::kBackward, {gc, b}, {gb}, 0);
  m.op("f1.bwd", Phase::kBackward, {gb, a}, {ga}, 0);
  m.op("f0.bwd", Phase::kBackward, {ga, x}, {gx}, 0);
  Graph graph = m.take();
  for (Op& op : graph.ops) op.time = 1.0;
  return graph;
}

// Keep-all holds 658 bytes at loss.bwd (x, a..e, ge), at f4.bwd (x, a..d,
// ge, gd) and at f3.bwd (x, a, b, c, gd, gc); 468 at f2.bwd. With 600, one
// 100-byte eviction is needed at loss.bwd and must last through f3.bwd.
// At loss.bwd (op 6, clock 6) the candidates a, b, c, d cost 1 s and hold
// 100 bytes each, with no evicted neighbour, so only the denominators
// differ. Staleness: a, b and d were last read by f4 (2 steps ago), c by
// f3 (3): h_DTR evicts c, the stalest. Next uses: d at op 7, c at 8, b at
// 9, a at 10: the lookahead evicts a, needed furthest away. h_DTR then has
// to bring c back for f3.bwd, where memory is still tight, and evicts a
// (staler than b, which the recomputation of c just read) to make room for
// gc: two recomputations (f2 for f3.bwd, f0 for f1.bwd). The lookahead
// keeps c and b, and brings a back for f1.bwd, when memory is free: one.
TEST(DtrLookahead, EvictsTheBufferNeededLastOnASkipChain) {
  const Graph graph = skip_chain();
  const SimResult keep_all = simulate(graph, default_plan(graph, gpu().name, kMaxBytes), gpu());
  ASSERT_EQ(device_peak(keep_all), 658u);
  struct Expected {
    std::string_view planner;
    Names evicted;
    Names recomputed;
  };
  for (const Expected& e :
       {Expected{"dtr", {"c", "a"}, {"f2", "f0"}},
        Expected{"dtr-eqclass", {"c", "a"}, {"f2", "f0"}}, Expected{kLookahead, {"a"}, {"f0"}},
        Expected{kLookaheadEq, {"a"}, {"f0"}}}) {
    SCOPED_TRACE(e.planner);
    const RematResult r = run_lookahead(e.planner, graph, 600);
    EXPECT_EQ(r.planner, e.planner);
    EXPECT_EQ(evicted(graph, r.plan), e.evicted);
    EXPECT_EQ(recomputed(graph, r.plan), e.recomputed);
    const SimResult sim = simulate(graph, r.plan, gpu());
    EXPECT_TRUE(sim.valid) << sim.reason;
    EXPECT_LE(device_peak(sim), 600u);
    EXPECT_DOUBLE_EQ(sim.iteration_time,
                     keep_all.iteration_time + static_cast<double>(e.recomputed.size()));
  }
}

TEST(DtrLookahead, UnlimitedBudgetIsTheDefaultPlan) {
  const Graph graph = skip_chain();
  const Plan reference = default_plan(graph, gpu().name, kMaxBytes);
  for (const std::string_view name : {kLookahead, kLookaheadEq}) {
    EXPECT_EQ(run_lookahead(name, graph, kMaxBytes).plan, reference) << name;
  }
}

// Below the floor (f3.bwd holds x, c, gd and gc: 458 bytes whatever is
// evicted) the planner declines up front under its own name; at the floor
// it fits.
TEST(DtrLookahead, DeclinesUnderItsOwnName) {
  const Graph graph = skip_chain();
  for (const std::string_view name : {kLookahead, kLookaheadEq}) {
    try {
      run_lookahead(name, graph, 457);
      ADD_FAILURE() << name << ": 457 fits";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_TRUE(
          what.starts_with(fmt::format("{}: op 8 (\"f3.bwd\") needs at least 458 bytes", name)))
          << what;
    }
    const RematResult r = run_lookahead(name, graph, 458);
    EXPECT_LE(device_peak(simulate(graph, r.plan, gpu())), 458u) << name;
  }
}

// ---- Zoo ----------------------------------------------------------------------------

Graph lookahead_model(const char* name) {
  const ModelInfo& info = find_model(name);
  ModelOptions options{.batch = 4};
  if (info.family == ModelFamily::kCnn) {
    options.image = 64;
  } else {
    options.seq = 256;
  }
  return build_model(name, options);
}

// Checks a plan; false when the planner declined (with a message under its
// name).
bool lookahead_fits(std::string_view name, const Graph& graph, uint64_t budget) {
  RematResult r;
  try {
    r = run_lookahead(name, graph, budget);
  } catch (const Error& e) {
    EXPECT_TRUE(std::string_view(e.what()).starts_with(fmt::format("{}:", name))) << e.what();
    return false;
  }
  EXPECT_EQ(r.planner, name);
  // Valid, within the budget, and only droppable activations evicted.
  return testing::plan_fits_evicting_only_droppable(graph, gpu(), budget, r.plan);
}

// DTR's lowest budget by bisection, then budgets from it to the keep-all
// peak: the lookahead fits every one.
TEST(DtrLookahead, ZooModelsFitFromDtrsLowestBudgetToKeepAll) {
  for (const char* model : {"gpt2-small", "bert-base", "resnet50", "mobilenetv2"}) {
    const Graph graph = lookahead_model(model);
    const uint64_t keep_all =
        device_peak(simulate(graph, default_plan(graph, gpu().name, kMaxBytes), gpu()));
    uint64_t lo = 0, hi = keep_all;  // dtr: lo declines, hi fits
    for (int k = 0; k < 12; ++k) {
      const uint64_t mid = lo + (hi - lo) / 2;
      (lookahead_fits("dtr", graph, mid) ? hi : lo) = mid;
    }
    ASSERT_LT(hi, keep_all) << model;
    for (const std::string_view name : {kLookahead, kLookaheadEq}) {
      SCOPED_TRACE(fmt::format("{} {}", model, name));
      for (const double f : {0.1, 0.3, 0.5, 0.7, 0.9, 1.0}) {
        const uint64_t budget = hi + static_cast<uint64_t>(f * static_cast<double>(keep_all - hi));
        EXPECT_TRUE(lookahead_fits(name, graph, budget))
            << budget << " (dtr's lowest " << hi << ")";
      }
    }
  }
}

}  // namespace
}  // namespace memwall
