// The plan builder (builders.h) on hand-made graphs.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../graph/graph_builder.h"
#include "memwall/graph/graph.h"
#include "memwall/plan/builders.h"

namespace memwall {
namespace {

// Cross-entropy as PyTorch runs it: `loss` reads the logits and the labels
// and saves log-probabilities; in backward, nll_bwd reads the labels (their
// last reader) and sm_bwd reads the log-probabilities.
//   buffers: 0 w param, 1 labels input, 2 logits, 3 log_probs, 4 loss,
//            5 seed, 6 grad_log_probs, 7 grad_logits, 8 w.grad
//   ops:     0 logits [w] -> [2]; 1 loss [2, 1] -> [4, 3]; 2 seed -> [5];
//            3 nll_bwd [5, 1] -> [6]; 4 sm_bwd [6, 3] -> [7]; 5 w.bwd [7, 2] -> [8]
Graph cross_entropy_graph() {
  testing::GraphBuilder g;
  const BufferId w = g.buffer("w", 64, BufferKind::kParam);
  const BufferId labels = g.buffer("labels", 64, BufferKind::kInput);
  const BufferId logits = g.buffer("logits", 64, BufferKind::kActivation);
  const BufferId log_probs = g.buffer("log_probs", 64, BufferKind::kActivation);
  const BufferId loss = g.buffer("loss", 64, BufferKind::kActivation);
  const BufferId seed = g.buffer("seed", 64, BufferKind::kTemp);
  const BufferId grad_log_probs = g.buffer("grad_log_probs", 64, BufferKind::kTemp);
  const BufferId grad_logits = g.buffer("grad_logits", 64, BufferKind::kTemp);
  const BufferId w_grad = g.buffer("w.grad", 64, BufferKind::kGrad);
  g.op("logits", Phase::kForward, {w}, {logits});
  g.op("loss", Phase::kForward, {logits, labels}, {loss, log_probs});
  g.op("seed", Phase::kBackward, {}, {seed});
  g.op("nll_bwd", Phase::kBackward, {seed, labels}, {grad_log_probs});
  g.op("sm_bwd", Phase::kBackward, {grad_log_probs, log_probs}, {grad_logits});
  g.op("w.bwd", Phase::kBackward, {grad_logits, logits}, {w_grad});
  g.graph.name = "cross-entropy";
  validate(g.graph);
  return g.graph;
}

size_t position(const std::vector<Step>& steps, const Step& step) {
  const auto it = std::find(steps.begin(), steps.end(), step);
  EXPECT_NE(it, steps.end());
  return static_cast<size_t>(it - steps.begin());
}

// Note [Inputs kept for recomputes]: dropping the log-probabilities makes
// their recompute before sm_bwd read the labels after nll_bwd, their last
// reader; the labels then stay until sm_bwd instead of going after nll_bwd.
TEST(PlanBuilder, KeepsAnInputARecomputeReadsAfterItsLastReader) {
  const Graph g = cross_entropy_graph();
  const std::vector<Step> plain = default_plan(g, "gpu", kMaxBytes).steps;
  EXPECT_EQ(position(plain, Step::free(1)), position(plain, Step::compute(3)) + 1);

  const Eviction drop{.buf = 3, .after = 1, .before = 4, .how = Eviction::How::kRecompute};
  const std::vector<Step> steps = plan_with_evictions(g, {&drop, 1}, "gpu", kMaxBytes).steps;
  const size_t recompute = position(steps, Step::recompute(1));
  EXPECT_GT(recompute, position(steps, Step::compute(3)));
  EXPECT_LT(recompute, position(steps, Step::compute(4)));
  EXPECT_GT(position(steps, Step::free(1)), position(steps, Step::compute(4)));
  EXPECT_LT(position(steps, Step::free(1)), position(steps, Step::compute(5)));
}

// A VGG-like pair of conv + ReLU, then a pool; the ReLU outputs r0 and r1
// are saved for backward and dropped, the conv outputs t0 and t1 are read
// only by the next ReLU.
//   buffers: 0 x input, 1 t0, 2 r0, 3 t1, 4 r1, 5 p, 6 g_p, 7 g_r1, 8 g_t1,
//            9 g_r0, 10 g_t0, 11 g_x
//   ops:     0 conv0 [x] -> [t0]; 1 relu0 [t0] -> [r0]; 2 conv1 [r0] -> [t1];
//            3 relu1 [t1] -> [r1]; 4 pool [r1] -> [p]; 5 seed [p] -> [g_p];
//            6 pool.bwd [g_p, r1] -> [g_r1]; 7 relu1.bwd [g_r1, r1] -> [g_t1];
//            8 conv1.bwd [g_t1, r0] -> [g_r0]; 9 relu0.bwd [g_r0, r0] -> [g_t0];
//            10 conv0.bwd [g_t0, x] -> [g_x]
Graph conv_relu_chain() {
  testing::GraphBuilder g;
  const BufferId x = g.buffer("x", 100, BufferKind::kInput);
  std::vector<BufferId> act;
  for (const char* name : {"t0", "r0", "t1", "r1"})
    act.push_back(g.buffer(name, 1000, BufferKind::kActivation));
  const BufferId p = g.buffer("p", 250, BufferKind::kActivation);
  const BufferId g_p = g.buffer("g_p", 250, BufferKind::kTemp);
  std::vector<BufferId> grad;
  for (const char* name : {"g_r1", "g_t1", "g_r0", "g_t0"})
    grad.push_back(g.buffer(name, 1000, BufferKind::kTemp));
  const BufferId g_x = g.buffer("g_x", 100, BufferKind::kTemp);
  g.op("conv0", Phase::kForward, {x}, {act[0]});
  g.op("relu0", Phase::kForward, {act[0]}, {act[1]});
  g.op("conv1", Phase::kForward, {act[1]}, {act[2]});
  g.op("relu1", Phase::kForward, {act[2]}, {act[3]});
  g.op("pool", Phase::kForward, {act[3]}, {p});
  g.op("seed", Phase::kBackward, {p}, {g_p});
  g.op("pool.bwd", Phase::kBackward, {g_p, act[3]}, {grad[0]});
  g.op("relu1.bwd", Phase::kBackward, {grad[0], act[3]}, {grad[1]});
  g.op("conv1.bwd", Phase::kBackward, {grad[1], act[1]}, {grad[2]});
  g.op("relu0.bwd", Phase::kBackward, {grad[2], act[1]}, {grad[3]});
  g.op("conv0.bwd", Phase::kBackward, {grad[3], x}, {g_x});
  g.graph.name = "conv-relu";
  validate(g.graph);
  return g.graph;
}

// Issue 19 (chen-sqrt peaked above keep-all on VGG-19): regenerating r1
// before pool.bwd recomputes conv0, relu0, conv1 and relu1. t0 and t1 are
// needed only by that chain, so each goes right after the ReLU that reads
// it, not after pool.bwd: the chain never holds t0, r0, t1 and r1 at once.
// r0 is read again later (conv1.bwd) and stays.
TEST(PlanBuilder, ARecomputeChainFreesWhatOnlyItNeedsAsItGoes) {
  const Graph g = conv_relu_chain();
  const std::vector<Eviction> drops = {
      {.buf = 2, .after = 2, .before = 8, .how = Eviction::How::kRecompute},
      {.buf = 4, .after = 4, .before = 6, .how = Eviction::How::kRecompute}};
  const std::vector<Step> steps = plan_with_evictions(g, drops, "gpu", kMaxBytes).steps;
  const std::vector<Step> chain = {Step::recompute(0), Step::recompute(1), Step::free(1),
                                   Step::recompute(2), Step::recompute(3), Step::free(3),
                                   Step::compute(6)};
  const size_t start = position(steps, Step::recompute(0));
  ASSERT_LE(start + chain.size(), steps.size());
  EXPECT_EQ(std::vector<Step>(steps.begin() + static_cast<std::ptrdiff_t>(start),
                              steps.begin() + static_cast<std::ptrdiff_t>(start + chain.size())),
            chain);
  const auto r0_freed =
      std::find(steps.begin() + static_cast<std::ptrdiff_t>(start), steps.end(), Step::free(2));
  EXPECT_GT(r0_freed - steps.begin(),
            static_cast<std::ptrdiff_t>(position(steps, Step::compute(9))));
  // Live bytes along the steps: at most x, g_p, r0, t1 and r1 while the
  // chain runs (p went after seed), where t0 used to stay as well.
  uint64_t live = 100, peak = 0;
  for (const Step& step : steps) {
    if (step.kind == StepKind::kCompute || step.kind == StepKind::kRecompute) {
      for (const BufferId b : g.ops[step.op].out) live += g.buffers[b].bytes;
    } else if (step.kind == StepKind::kFree) {
      live -= g.buffers[step.buf].bytes;
    }
    if (step.kind == StepKind::kRecompute) peak = std::max(peak, live);
  }
  EXPECT_EQ(peak, 100 + 250 + 3 * 1000);  // x, g_p, r0 + t1 + r1
}

}  // namespace
}  // namespace memwall

namespace memwall {
namespace {

// Note [Workspaces kept for recomputes]: two matmuls, the first making the
// cuBLAS workspace beside its output (a temp eager PyTorch never frees),
// the second reading it. Dropping the second's output makes backward
// recompute it; the workspace then stays to the end instead of the first
// matmul running again to remake it.
//   buffers: 0 w param, 1 x input, 2 a, 3 ws (workspace), 4 b, 5 g, 6 w.grad
//   ops:     0 mm0 [x, w] -> [a, ws]; 1 mm1 [a, w, ws] -> [b]; 2 seed [b] -> [g];
//            3 bwd [g, b] -> [w.grad]
TEST(PlanBuilder, AWorkspaceEagerNeverFreesIsHeldForRecomputes) {
  testing::GraphBuilder g;
  const BufferId w = g.buffer("w", 64, BufferKind::kParam);
  const BufferId x = g.buffer("x", 64, BufferKind::kInput);
  const BufferId a = g.buffer("a", 64, BufferKind::kActivation);
  const BufferId ws = g.buffer("cublas_workspace.forward", 32, BufferKind::kTemp);
  const BufferId b = g.buffer("b", 64, BufferKind::kActivation);
  const BufferId grad = g.buffer("g", 64, BufferKind::kTemp);
  const BufferId w_grad = g.buffer("w.grad", 64, BufferKind::kGrad);
  g.op("mm0", Phase::kForward, {x, w}, {a, ws});
  g.op("mm1", Phase::kForward, {a, w, ws}, {b});
  g.op("seed", Phase::kBackward, {b}, {grad});
  g.op("bwd", Phase::kBackward, {grad, b, a}, {w_grad});
  g.graph.name = "workspace";
  validate(g.graph);
  const Eviction drop{.buf = b, .after = 2, .before = 3, .how = Eviction::How::kRecompute};

  // Without an eager lifetime (the zoo's graphs) it is regenerated.
  std::vector<Step> steps = plan_with_evictions(g.graph, {&drop, 1}, "gpu", kMaxBytes).steps;
  EXPECT_NE(std::find(steps.begin(), steps.end(), Step::recompute(0)), steps.end());

  g.graph.buffers[ws].eager_free = kNoOp;  // the trace: eager never frees it
  steps = plan_with_evictions(g.graph, {&drop, 1}, "gpu", kMaxBytes).steps;
  EXPECT_EQ(std::find(steps.begin(), steps.end(), Step::recompute(0)), steps.end());
  EXPECT_LT(position(steps, Step::recompute(1)), position(steps, Step::compute(3)));
  EXPECT_GT(position(steps, Step::free(ws)), position(steps, Step::compute(3)));
}

}  // namespace
}  // namespace memwall
