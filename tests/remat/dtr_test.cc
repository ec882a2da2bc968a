// DTR (src/remat/dtr.cc): hand-built chains where each heuristic's
// evictions and recomputations are known, the budget floor and a failure
// inside a rematerialization, and every heuristic on zoo models at budgets
// from the lowest it reaches to the keep-all peak.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

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

constexpr const char* kHeuristics[] = {"dtr", "dtr-eqclass", "dtr-lru", "dtr-largest"};

RematResult run(const char* name, const Graph& graph, uint64_t budget) {
  const RematPlanner* planner = find_remat_planner(name);
  if (planner == nullptr) throw Error(fmt::format("no planner {}", name));
  return planner->fn(graph, gpu(), budget, {});
}

struct Layer {
  uint64_t bytes;
  double time;  // seconds (a measured time, so costs are exact)
};

// x (input) -> f0 -> y0 -> ... -> f{n-1} -> y{n-1} -> loss; backward:
// loss.bwd reads y{n-1} and makes loss.grad; f_i.bwd reads the gradient and
// f_i's input (y{i-1}, or x) and makes a gradient of grad_bytes (8 for x).
// Every backward op and the loss take 1 s.
Graph timed_chain(const std::vector<Layer>& layers, uint64_t loss_grad_bytes, uint64_t grad_bytes) {
  testing::GraphMaker m("timed-chain");
  std::vector<BufferId> y{m.buffer("x", 8, BufferKind::kInput)};
  std::vector<double> times;
  for (size_t i = 0; i < layers.size(); ++i) {
    const BufferId out = m.buffer(fmt::format("y{}", i), layers[i].bytes);
    m.op(fmt::format("f{}", i), Phase::kForward, {y.back()}, {out}, 0);
    times.push_back(layers[i].time);
    y.push_back(out);
  }
  const BufferId loss = m.buffer("loss", 4);
  m.op("loss", Phase::kForward, {y.back()}, {loss}, 0);
  BufferId grad = m.buffer("loss.grad", loss_grad_bytes, BufferKind::kTemp);
  m.op("loss.bwd", Phase::kBackward, {y.back()}, {grad}, 0);
  for (size_t i = layers.size(); i-- > 0;) {
    const BufferId next =
        m.buffer(fmt::format("g{}", i), i == 0 ? 8 : grad_bytes, BufferKind::kTemp);
    m.op(fmt::format("f{}.bwd", i), Phase::kBackward, {grad, y[i]}, {next}, 0);
    grad = next;
  }
  Graph graph = m.take();
  for (Op& op : graph.ops) op.time = op.id < static_cast<OpId>(times.size()) ? times[op.id] : 1.0;
  return graph;
}

using testing::evicted;
using testing::recomputed;

using Names = std::vector<std::string>;

struct DtrExpected {
  const char* heuristic;
  Names evicted;
  Names recomputed;
};

void expect_plan(const Graph& graph, uint64_t budget, const DtrExpected& e) {
  SCOPED_TRACE(e.heuristic);
  const RematResult r = run(e.heuristic, graph, budget);
  EXPECT_EQ(evicted(graph, r.plan), e.evicted);
  EXPECT_EQ(recomputed(graph, r.plan), e.recomputed);
  const SimResult sim = simulate(graph, r.plan, gpu());
  EXPECT_TRUE(sim.valid) << sim.reason;
  EXPECT_LE(device_peak(sim), budget);
}

// Keep-all peaks at loss.bwd (608 resident + 10); one eviction of 100 or
// 300 bytes fits 612. At that point (clock 5) y0, y1, y2 were last read 4,
// 3 and 2 steps ago; h_DTR = c / (m s): y0 1/(100*4), y1 10/(300*3),
// y2 0.01/(100*2), so y2. LRU takes the stalest (y0), largest-first y1.
// Each is recomputed (from a resident input) before the op reading it.
TEST(Dtr, OneEvictionPerHeuristicOnAChain) {
  const Graph graph = timed_chain({{100, 1}, {300, 10}, {100, 0.01}, {100, 1}}, 10, 10);
  const SimResult keep_all = simulate(graph, default_plan(graph, gpu().name, kMaxBytes), gpu());
  ASSERT_EQ(device_peak(keep_all), 618u);
  for (const DtrExpected& e :
       {DtrExpected{"dtr", {"y2"}, {"f2"}}, DtrExpected{"dtr-eqclass", {"y2"}, {"f2"}},
        DtrExpected{"dtr-lru", {"y0"}, {"f0"}}, DtrExpected{"dtr-largest", {"y1"}, {"f1"}}}) {
    expect_plan(graph, 612, e);
  }
}

// Two evictions at loss.bwd (2508 bytes for a budget of 1500). The first
// is y1 for h_DTR (1/(1000*4) is the least). For the second, y2's own
// score is the least (0.1/(100*3)), but recomputing y2 now needs y1 too:
// e*(y2) = {y1} gives (0.1 + 1)/(100*3), e*(y0) = {y1} (y1 needs y0)
// gives (1 + 1)/(100*5), and y3, with no evicted neighbour, 0.5/(100*2)
// is the least. The class of y1 gives h_DTR-eq the same numbers. LRU
// evicts y0 then y1; largest-first y1 then y0 (the staler of the 100-byte
// ties). Recomputation follows the backward: y3 for f4.bwd, y1 (and y0
// first when it is gone) for f2.bwd.
TEST(Dtr, EvictedNeighborhoodSteersTheSecondEviction) {
  const Graph graph =
      timed_chain({{100, 1}, {1000, 1}, {100, 0.1}, {100, 0.5}, {100, 1}}, 1100, 10);
  for (const DtrExpected& e : {DtrExpected{"dtr", {"y1", "y3"}, {"f3", "f1"}},
                               DtrExpected{"dtr-eqclass", {"y1", "y3"}, {"f3", "f1"}},
                               DtrExpected{"dtr-lru", {"y0", "y1"}, {"f0", "f1"}},
                               DtrExpected{"dtr-largest", {"y1", "y0"}, {"f0", "f1"}}}) {
    expect_plan(graph, 1500, e);
  }
}

TEST(Dtr, UnlimitedBudgetIsTheDefaultPlan) {
  const Graph graph = timed_chain({{100, 1}, {300, 10}, {100, 0.01}, {100, 1}}, 10, 10);
  const Plan reference = default_plan(graph, gpu().name, kMaxBytes);
  for (const char* name : kHeuristics) {
    const RematResult r = run(name, graph, kMaxBytes);
    EXPECT_EQ(r.plan, reference) << name;
    EXPECT_EQ(r.planner, name);
  }
}

// The floor: f1 holds x, y0 and y1 (408 bytes) whatever is evicted. At 417
// the forward fits (y0, then y1 evicted), but f2.bwd needs y1 back:
// recomputing f0, then f1 with y0 locked as its input, needs 118 + 300.
// So 418 is the lowest budget for every heuristic (each eviction is forced).
TEST(Dtr, LowestBudgetAndWhyBelowIt) {
  const Graph graph = timed_chain({{100, 1}, {300, 10}, {100, 0.01}, {100, 1}}, 10, 10);
  for (const char* name : kHeuristics) {
    SCOPED_TRACE(name);
    const RematResult r = run(name, graph, 418);
    EXPECT_EQ(recomputed(graph, r.plan), (Names{"f0", "f1", "f0"}));
    EXPECT_LE(device_peak(simulate(graph, r.plan, gpu())), 418u);
    try {
      run(name, graph, 417);
      ADD_FAILURE() << "417 fits";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_TRUE(what.starts_with(std::string(name) + ": op 1 (\"f1\") (recomputed for op 7"))
          << what;
      EXPECT_NE(what.find("at least 418"), std::string::npos) << what;
    }
    try {
      run(name, graph, 407);
      ADD_FAILURE() << "407 fits";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_TRUE(what.starts_with(std::string(name) + ": op 1 (\"f1\") needs at least 408 bytes"))
          << what;
    }
  }
}

// ---- Zoo ----------------------------------------------------------------------------

Graph small_model(const char* name) {
  const ModelInfo& info = find_model(name);
  ModelOptions options{.batch = 4};
  if (info.family == ModelFamily::kCnn) {
    options.image = 64;
  } else {
    options.seq = 256;
  }
  return build_model(name, options);
}

// Checks a plan; false when the planner declined (with a "dtr" message).
bool fits(const char* name, const Graph& graph, uint64_t budget) {
  RematResult r;
  try {
    r = run(name, graph, budget);
  } catch (const Error& e) {
    EXPECT_TRUE(std::string(e.what()).starts_with(std::string(name) + ":")) << e.what();
    return false;
  }
  // Valid, within the budget, and only droppable activations evicted.
  return testing::plan_fits_evicting_only_droppable(graph, gpu(), budget, r.plan);
}

// The lowest budget found by bisection fits, and so does every budget
// between it and the keep-all peak.
TEST(Dtr, ZooModelsFitFromTheLowestBudgetToKeepAll) {
  for (const char* model : {"gpt2-small", "bert-base", "resnet50", "mobilenetv2"}) {
    const Graph graph = small_model(model);
    const uint64_t keep_all =
        device_peak(simulate(graph, default_plan(graph, gpu().name, kMaxBytes), gpu()));
    for (const char* name : kHeuristics) {
      SCOPED_TRACE(fmt::format("{} {}", model, name));
      ASSERT_TRUE(fits(name, graph, keep_all));
      uint64_t lo = 0, hi = keep_all;  // lo declines, hi fits
      for (int k = 0; k < 12; ++k) {
        const uint64_t mid = lo + (hi - lo) / 2;
        (fits(name, graph, mid) ? hi : lo) = mid;
      }
      EXPECT_LT(hi, keep_all);
      for (const double f : {0.1, 0.3, 0.5, 0.7, 0.9}) {
        const uint64_t budget = hi + static_cast<uint64_t>(f * static_cast<double>(keep_all - hi));
        EXPECT_TRUE(fits(name, graph, budget)) << budget << " (lowest " << hi << ")";
      }
    }
  }
}

}  // namespace
}  // namespace memwall
