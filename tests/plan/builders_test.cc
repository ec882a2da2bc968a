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

}  // namespace
}  // namespace memwall
