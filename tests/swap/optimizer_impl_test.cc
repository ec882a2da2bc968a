// Note [Optimizer as the device runs it] (src/swap/optimizer_impl.cc) and
// Note [Steps after backward] (src/swap/offload.cc).
#include "memwall/swap/optimizer_impl.h"

#include <gtest/gtest.h>

#include <string>

#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/plan/builders.h"
#include "memwall/sim/simulator.h"
#include "memwall/swap/offload.h"
#include "memwall/swap/optimizer_steps.h"
#include "memwall/swap/zero.h"
#include "traced_adam.h"

namespace memwall {
namespace {

using testing::traced_adam;
using testing::TracedAdam;

TEST(OptimizerImpl, ForLoopForeachAndFused) {
  const TracedAdam t = traced_adam();
  const uint64_t weight = t.graph.buffers[t.params[0]].bytes;  // 512 x 512 fp32
  const Graph loop = optimizer_as_run(t.graph, OptimizerImpl::kForLoop);
  EXPECT_EQ(loop.ops.size(), t.graph.ops.size());
  EXPECT_EQ(loop.meta.at("optimizer_impl"), "for-loop");

  const Graph foreach = optimizer_as_run(t.graph, OptimizerImpl::kForeach);
  validate(foreach);
  EXPECT_EQ(foreach.meta.at("optimizer_impl"), "foreach");
  const std::vector<ModelState> each = model_states(foreach);
  ASSERT_EQ(each.size(), 3u);
  double loop_bytes = 0;
  for (const OpId id : t.steps[0]) loop_bytes += t.graph.ops[id].bytes;
  const Op& foreach_step = foreach.ops[each[0].step];
  EXPECT_DOUBLE_EQ(foreach_step.bytes, loop_bytes);  // each kernel's pass, one after another
  EXPECT_EQ(foreach_step.workspace, 2 * weight);
  // Note [Foreach lists]: torch's _multi_tensor_adam holds one sqrt list
  // over all three weights (the loop's sqrt, then its quotient, cross from
  // kernel to kernel one at a time); the group's last step holds it.
  EXPECT_EQ(foreach.ops[each[1].step].workspace, 2 * weight);
  EXPECT_EQ(foreach.ops[each[2].step].workspace, 3 * weight);

  const Graph fused = optimizer_as_run(t.graph, OptimizerImpl::kFused);
  validate(fused);
  const Op& fused_step = fused.ops[model_states(fused)[0].step];
  // Reads the gradient; reads and writes the step counter (4 bytes), both
  // moments and the parameter once.
  EXPECT_DOUBLE_EQ(fused_step.bytes, static_cast<double>(weight + 2 * (4 + 3 * weight)));
  EXPECT_EQ(fused_step.workspace, 0u);
  // The same calls in sequence: the executor runs it as before.
  EXPECT_EQ(fused_step.call, foreach_step.call);

  const Hardware& hw = find_gpu("a100-80g");
  double loop_time = 0, fused_time = 0;
  for (const Op& op : loop.ops)
    loop_time += op.phase == Phase::kOptimizer ? op_time(hw, loop, op) : 0;
  for (const Op& op : fused.ops)
    fused_time += op.phase == Phase::kOptimizer ? op_time(hw, fused, op) : 0;
  EXPECT_LT(fused_time, loop_time);

  EXPECT_EQ(parse_optimizer_impl("fused"), OptimizerImpl::kFused);
  try {
    parse_optimizer_impl("apex");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "unknown optimizer implementation 'apex' (known: for-loop, foreach, fused)");
  }
}

// Note [Foreach lists] on the zoo's one-op steps: Adam's list is a state's
// size per parameter (fp32 moments beside bf16 weights), SGD has none; ZeRO
// shards it with the states.
TEST(OptimizerImpl, ForeachListsOfTheZoosSteps) {
  ModelOptions o;
  o.batch = 2;
  o.seq = 64;
  o.precision = Precision::kBf16;
  const Graph adam = build_model("gpt2-small", o);
  uint64_t params = 0;
  for (const Buffer& b : adam.buffers) params += b.kind == BufferKind::kParam ? b.bytes / 2 : 0;
  const Graph foreach = optimizer_as_run(adam, OptimizerImpl::kForeach);
  const std::vector<ModelState> steps = model_states(foreach);
  for (size_t i = 0; i + 1 < steps.size(); ++i) EXPECT_EQ(foreach.ops[steps[i].step].workspace, 0u);
  EXPECT_EQ(foreach.ops[steps.back().step].workspace, 4 * params);
  EXPECT_EQ(optimizer_as_run(adam, OptimizerImpl::kFused).ops[steps.back().step].workspace, 0u);

  ZeroOptions z;
  z.stage = 2;
  z.ranks = 8;
  const Graph rank = zero_rank_graph(foreach, z);
  const std::vector<ModelState> sharded = model_states(rank);
  EXPECT_EQ(rank.ops[sharded.back().step].workspace, (4 * params + 7) / 8);

  o.optimizer = Optimizer::kMomentum;
  const Graph sgd = optimizer_as_run(build_model("gpt2-small", o), OptimizerImpl::kForeach);
  for (const Op& op : sgd.ops) EXPECT_EQ(op.workspace * (op.phase == Phase::kOptimizer), 0u);
}

// ZeRO-Offload as DeepSpeed runs it: no CPU step starts before the last
// gradient is on the host, and the iteration takes longer than with the
// steps overlapping backward.
TEST(StepsAfterBackward, NoCpuStepBeforeTheLastGradient) {
  const TracedAdam t = traced_adam();
  const Hardware& hw = find_gpu("a100-40g");
  SimResult sims[2];
  for (const bool after : {false, true}) {
    const OffloadOptions options{.optimizer = Tier::kHost, .steps_after_backward = after};
    const OffloadGraph og = offload_graph(t.graph, options);
    const Plan base = default_plan(planning_view(og, options), hw.name, kMaxBytes);
    const Plan plan = apply_offload(og, base, options);
    size_t last_gradient_out = 0, first_cpu_step = plan.steps.size();
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const Step& s = plan.steps[i];
      if (s.kind == StepKind::kSwapOut && og.graph.buffers[s.buf].kind == BufferKind::kGrad) {
        last_gradient_out = i;
      }
      if (s.kind == StepKind::kCompute && s.on == Tier::kHost) {
        first_cpu_step = std::min(first_cpu_step, i);
      }
    }
    if (after) {
      EXPECT_GT(first_cpu_step, last_gradient_out);
    } else {
      EXPECT_LT(first_cpu_step, last_gradient_out);
    }
    sims[after] = simulate(og.graph, plan, hw);
    ASSERT_TRUE(sims[after].valid) << sims[after].reason;
  }
  EXPECT_GT(sims[1].iteration_time, sims[0].iteration_time);
  EXPECT_DOUBLE_EQ(sims[1].host_compute_time, sims[0].host_compute_time);
}

}  // namespace
}  // namespace memwall
