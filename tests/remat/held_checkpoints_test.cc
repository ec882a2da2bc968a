// Note [Checkpoints are held] (src/remat/checkpoints.cc): a layer's input
// that backward does not read itself stays until the layer's recompute
// reads it, as torch.utils.checkpoint saves its region's inputs.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "../graph/graph_builder.h"
#include "memwall/graph/graph.h"
#include "memwall/remat/remat.h"
#include "memwall/sim/simulator.h"
#include "remat_test_util.h"

namespace memwall {
namespace {

// Two Llama-like layers: each casts its input (the cast's output is what
// backward saves, as the RMSNorm's fp32 copy is), multiplies it by a
// weight, and adds the product to its input. The first layer's output is
// read only by the second layer's forward.
Graph two_cast_layers() {
  testing::GraphBuilder g;
  const BufferId x = g.buffer("x", 64, BufferKind::kInput);
  const BufferId w0 = g.buffer("layers.0.w", 64, BufferKind::kParam);
  const BufferId w1 = g.buffer("layers.1.w", 64, BufferKind::kParam);
  const BufferId e = g.buffer("embed", 1000, BufferKind::kActivation);
  const BufferId c0 = g.buffer("layers.0.cast", 2000, BufferKind::kActivation);
  const BufferId m0 = g.buffer("layers.0.mm", 1000, BufferKind::kActivation);
  const BufferId o0 = g.buffer("layers.0.add", 1000, BufferKind::kActivation);
  const BufferId c1 = g.buffer("layers.1.cast", 2000, BufferKind::kActivation);
  const BufferId m1 = g.buffer("layers.1.mm", 1000, BufferKind::kActivation);
  const BufferId o1 = g.buffer("layers.1.add", 1000, BufferKind::kActivation);
  const BufferId loss = g.buffer("loss", 4, BufferKind::kActivation);
  const BufferId g2 = g.buffer("g2", 1000, BufferKind::kTemp);
  const BufferId g1 = g.buffer("g1", 1000, BufferKind::kTemp);
  const BufferId g0 = g.buffer("g0", 1000, BufferKind::kTemp);
  const BufferId gw1 = g.buffer("layers.1.w.grad", 64, BufferKind::kGrad);
  const BufferId gw0 = g.buffer("layers.0.w.grad", 64, BufferKind::kGrad);
  g.op("embed", Phase::kForward, {x}, {e});
  g.op("layers.0.cast", Phase::kForward, {e}, {c0});
  g.op("layers.0.mm", Phase::kForward, {c0, w0}, {m0});
  g.op("layers.0.add", Phase::kForward, {e, m0}, {o0});
  g.op("layers.1.cast", Phase::kForward, {o0}, {c1});
  g.op("layers.1.mm", Phase::kForward, {c1, w1}, {m1});
  g.op("layers.1.add", Phase::kForward, {o0, m1}, {o1});
  g.op("head", Phase::kForward, {o1}, {loss});
  g.op("head.bwd", Phase::kBackward, {loss}, {g2});
  g.op("layers.1.bwd", Phase::kBackward, {g2, c1, m1}, {g1, gw1});
  g.op("layers.0.bwd", Phase::kBackward, {g1, c0, m0}, {g0, gw0});
  g.graph.name = "two cast layers";
  validate(g.graph);
  return g.graph;
}

std::multiset<std::string> ops_brought_back(const Graph& graph, const Plan& plan) {
  std::multiset<std::string> names;
  for (const Step& s : plan.steps) {
    if (s.kind == StepKind::kRecompute) names.insert(graph.ops[s.op].name);
  }
  return names;
}

// per-layer keeps the first layer's output and holds it for the second
// layer's recompute: each layer's cast and matmul come back once, and
// neither the first layer's add nor the embedding is regenerated.
TEST(HeldCheckpoints, ALayersInputStaysForItsRecompute) {
  const Graph graph = two_cast_layers();
  const RematResult r = plan_per_layer(graph, gpu(), kMaxBytes, {});
  const SimResult sim = simulate(graph, r.plan, gpu());
  ASSERT_TRUE(sim.valid) << sim.reason;
  EXPECT_EQ(ops_brought_back(graph, r.plan),
            (std::multiset<std::string>{"layers.0.cast", "layers.0.mm", "layers.1.cast",
                                        "layers.1.mm"}));
}

}  // namespace
}  // namespace memwall
