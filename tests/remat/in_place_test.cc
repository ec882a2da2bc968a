// Rematerialization of programs with in-place updates (Note [Buffer
// versions] in src/graph/versions.cc): a ResNet-like chain whose every
// convolution is followed by ReLU(inplace=True).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "memwall/graph/versions.h"
#include "memwall/remat/remat.h"
#include "memwall/sim/simulator.h"
#include "remat_graphs.h"
#include "remat_test_util.h"
#include "test_util.h"

namespace memwall {
namespace {

using testing::GraphBuilder;

// c_i = conv_i(y_{i-1}) (1 GFLOP), relu_i updates c_i in place, y_i is c_i
// after it; loss(y_last); backward: relu_i.bwd reads the gradient and y_i
// (threshold_backward reads the ReLU's result), conv_i.bwd reads that and
// y_{i-1}. Sizes alternate 3 MB / 1 MB so that which buffers to keep
// matters. `updates` as the tracer records it; version_in_place_updates
// turns it into versions.
Graph relu_chain(int n) {
  GraphBuilder g;
  g.graph.name = fmt::format("relu-chain{}", n);
  std::vector<BufferId> y{g.buffer("w", 8, BufferKind::kParam)};
  for (int i = 0; i < n; ++i) {
    const uint64_t bytes = i % 2 ? 1'000'000 : 3'000'000;
    const BufferId c = g.buffer(fmt::format("c{}", i), bytes, BufferKind::kActivation);
    g.graph.ops[g.op(fmt::format("conv{}", i), Phase::kForward, {y.back()}, {c})].flops = 1e9;
    g.graph.ops[g.op(fmt::format("relu{}", i), Phase::kForward, {}, {}, {c})].flops = 1e6;
    y.push_back(c);
  }
  const BufferId loss = g.buffer("loss", 4, BufferKind::kActivation);
  g.op("loss", Phase::kForward, {y.back()}, {loss});
  BufferId grad = g.buffer("loss.grad", g.graph.buffers[y.back()].bytes, BufferKind::kTemp);
  g.op("loss.bwd", Phase::kBackward, {y.back(), loss}, {grad});
  for (int i = n; i-- > 0;) {
    const BufferId pre =
        g.buffer(fmt::format("c{}.grad", i), g.graph.buffers[y[i + 1]].bytes, BufferKind::kTemp);
    g.graph.ops[g.op(fmt::format("relu{}.bwd", i), Phase::kBackward, {grad, y[i + 1]}, {pre})]
        .flops = 1e6;
    const BufferId next =
        g.buffer(fmt::format("y{}.grad", i), g.graph.buffers[y[i]].bytes, BufferKind::kTemp);
    g.graph.ops[g.op(fmt::format("conv{}.bwd", i), Phase::kBackward, {pre, y[i]}, {next})].flops =
        2e9;
    grad = next;
  }
  validate(g.graph);
  return g.graph;
}

TEST(RematInPlace, VersionsLowerTheFloorToTheOutOfPlaceRewrites) {
  const Graph legacy = relu_chain(12);
  Graph g = legacy;
  ASSERT_EQ(version_in_place_updates(g), 12);
  validate(g);
  const Graph rewritten = out_of_place(g);
  // Storage sharing keeps the in-place program's keep-all peak.
  EXPECT_EQ(memory_profile(g).peak_bytes, memory_profile(legacy).peak_bytes);
  EXPECT_GE(memory_profile(rewritten).peak_bytes, memory_profile(g).peak_bytes);

  // The floor's search stops at its time limit: 2 s left the versioned
  // floor 1.42x the rewrite's under AddressSanitizer on a host half as fast
  // as the development machine, with the suite running beside it.
  RematOptions options;
  options.time_limit = search_seconds(8);
  const RematFloor before = remat_floor(legacy, gpu(), options);
  const RematFloor after = remat_floor(g, gpu(), options);
  const RematFloor reference = remat_floor(rewritten, gpu(), options);
  // With `updates` nothing an in-place op touched can be dropped: the
  // forward keeps every c_i. With versions the floor is the out-of-place
  // rewrite's (within 2%, the bar) and far lower.
  EXPECT_LE(static_cast<double>(after.bytes), 1.02 * static_cast<double>(reference.bytes));
  EXPECT_LT(static_cast<double>(after.bytes), 0.6 * static_cast<double>(before.bytes));
  // The floor's plan is one the simulator accepts at that budget, and it
  // recomputes through the in-place ops.
  const SimResult sim = require_fit(g, gpu(), after.plan, after.bytes, "test");
  EXPECT_LE(device_peak(sim), after.bytes);
  int replays = 0;
  for (const Step& s : after.plan.steps) {
    replays += s.kind == StepKind::kRecompute && g.ops[s.op].name.starts_with("relu");
  }
  EXPECT_GT(replays, 0);
}

TEST(RematInPlace, EveryPlannerFitsOrSaysWhyAndMemwallIsNeverWorse) {
  Graph g = relu_chain(12);
  version_in_place_updates(g);
  RematOptions options;
  options.time_limit = search_seconds(1);
  const uint64_t peak = memory_profile(g).peak_bytes;
  const uint64_t floor = remat_floor(g, gpu(), options).bytes;
  for (const uint64_t budget : {floor + (peak - floor) / 3, floor + 2 * (peak - floor) / 3}) {
    double best_baseline = 1e300;
    double memwall = 0;
    for (const RematPlanner& planner : remat_planners()) {
      SCOPED_TRACE(fmt::format("{} at {} bytes", planner.name, budget));
      try {
        const RematResult r = planner.fn(g, gpu(), budget, options);
        const SimResult sim = require_fit(g, gpu(), r.plan, budget, planner.name);
        EXPECT_LE(device_peak(sim), budget);
        if (planner.name == "memwall") {
          memwall = sim.iteration_time;
        } else {
          best_baseline = std::min(best_baseline, sim.iteration_time);
        }
      } catch (const Error& e) {
        EXPECT_NE(planner.name, "memwall") << e.what();
        EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      }
    }
    ASSERT_GT(memwall, 0);
    EXPECT_LE(memwall, best_baseline * (1 + 1e-9));
  }
}

}  // namespace
}  // namespace memwall
