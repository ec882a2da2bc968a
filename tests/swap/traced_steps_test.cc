// Traced optimizer steps (Note [Traced optimizer steps] in
// src/swap/optimizer_steps.cc): the runs of ops recognised as each
// parameter's step, their fusion, ZeRO and ZeRO-Offload over them (accepted
// by the simulator), and one error naming the op where there are none.
#include <algorithm>
#include <numeric>
#include <string>

#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "memwall/base/error.h"
#include "memwall/graph/counts.h"
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

std::vector<OpId> op_range(OpId first, int count) {
  std::vector<OpId> ids(static_cast<size_t>(count));
  std::iota(ids.begin(), ids.end(), first);
  return ids;
}

// The message model_states throws for `g`, or "" when it throws none.
std::string steps_error(const Graph& g) {
  try {
    model_states(g);
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

TEST(TracedSteps, GroupsEachParametersRunOfOps) {
  const TracedAdam t = traced_adam();
  validate(t.graph);
  const std::vector<ModelState> steps = model_states(t.graph);
  ASSERT_EQ(steps.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    const ModelState& s = steps[i];
    // Golden: ops 12-19, 20-27, 28-35 (traced_adam.h); the step counter's
    // add_, which reads no gradient, belongs to its run by position.
    EXPECT_EQ(s.ops, op_range(12 + 8 * static_cast<OpId>(i), 8));
    EXPECT_EQ(s.step, s.ops.back());
    EXPECT_EQ(s.param, t.params[i]);
    EXPECT_EQ(s.grad, t.grads[i]);
    EXPECT_EQ(s.states, t.states[i]);  // step, exp_avg, exp_avg_sq; not the running mean
    EXPECT_EQ(s.temps, t.temps[i]);
    EXPECT_FALSE(is_single_op_step(t.graph, s));
  }
  // AdamW updates the parameter twice (decoupled decay first): one run of 9.
  const TracedAdam w = traced_adam(256, 512, true);
  const std::vector<ModelState> adamw = model_states(w.graph);
  ASSERT_EQ(adamw.size(), 3u);
  EXPECT_EQ(adamw[1].ops, op_range(21, 9));
  // A zoo step is one op already.
  const Graph zoo = build_model("gpt2-small", {.batch = 1, .seq = 64});
  for (const ModelState& s : model_states(zoo)) ASSERT_TRUE(is_single_op_step(zoo, s));
}

TEST(TracedSteps, FusesEachRunIntoOneStep) {
  const TracedAdam t = traced_adam();
  const Graph f = fuse_optimizer_steps(t.graph);
  validate(f);
  EXPECT_EQ(f.ops.size(), t.graph.ops.size() - 3 * 7);
  EXPECT_EQ(f.buffers.size(), t.graph.buffers.size() - 3 * 2);  // temporaries dropped
  // Forward and backward keep their ops and ids.
  for (OpId id = 0; id < 12; ++id) EXPECT_EQ(f.ops[id].name, t.graph.ops[id].name);
  const std::vector<ModelState> steps = model_states(f);
  ASSERT_EQ(steps.size(), 3u);
  const uint64_t weight = t.graph.buffers[t.params[0]].bytes;
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(is_single_op_step(f, steps[i]));
    const Op& op = f.ops[steps[i].step];
    EXPECT_EQ(op.name, fmt::format("w{}.step", i));
    EXPECT_EQ(op.type, "adam");
    EXPECT_EQ(op.phase, Phase::kOptimizer);
    EXPECT_EQ(f.buffers[op.in[0]].name, fmt::format("w{}.grad", i));
    ASSERT_EQ(op.updates.size(), 4u);  // step, exp_avg, exp_avg_sq, then the parameter
    EXPECT_EQ(f.buffers[op.updates.back()].name, fmt::format("w{}", i));
    // sqrt and div are live together at the div: the step's workspace.
    EXPECT_EQ(op.workspace, 2 * weight);
    double flops = 0, bytes = 0;
    for (const OpId id : t.steps[i]) {
      flops += t.graph.ops[id].flops;
      bytes += t.graph.ops[id].bytes;
    }
    EXPECT_DOUBLE_EQ(op.flops, flops);
    EXPECT_DOUBLE_EQ(op.bytes, bytes);
    EXPECT_FALSE(op.time.has_value());
  }
  // Measured ops: the fused step's time is their sum.
  TracedAdam timed = traced_adam();
  for (Op& op : timed.graph.ops) op.time = 1e-3;
  const Graph tf = fuse_optimizer_steps(timed.graph);
  EXPECT_DOUBLE_EQ(*tf.ops[model_states(tf)[0].step].time, 8e-3);
  // Nothing to fuse: the graph comes back as it was.
  const Graph zoo = build_model("gpt2-small", {.batch = 1, .seq = 64});
  const Graph same = fuse_optimizer_steps(zoo);
  EXPECT_EQ(same.ops.size(), zoo.ops.size());
  EXPECT_EQ(same.buffers.size(), zoo.buffers.size());
}

// ZeRO-Offload of the traced graph: one CPU step per parameter, timed for
// its parameter count, the gradient out and the new parameter in once.
TEST(TracedSteps, ZeroOffloadOfTracedAdamSimulates) {
  const TracedAdam t = traced_adam();
  const OffloadOptions options{.optimizer = Tier::kHost};
  const OffloadGraph og = offload_graph(t.graph, options);
  validate(og.graph);
  EXPECT_EQ(og.graph.ops.size(), 12u + 3 * 2);  // forward, backward, then step and apply each
  ASSERT_EQ(og.states.size(), 3u);
  const uint64_t weight = t.graph.buffers[t.params[0]].bytes;
  const uint64_t elements = element_count(t.graph.buffers[t.params[0]]);
  for (const OffloadedState& o : og.states) {
    const Op& step = og.graph.ops[o.step];
    ASSERT_EQ(step.in.size(), 1u);
    EXPECT_EQ(step.in[0], o.grad);
    EXPECT_EQ(step.out.size(), 1u);
    EXPECT_EQ(o.states.size(), 4u);  // step, exp_avg, exp_avg_sq and the fp32 master copy
    EXPECT_EQ(step.workspace, 2 * weight);
    EXPECT_EQ(o.apply, o.step + 1);
  }
  const Hardware& hw = find_gpu("a100-40g");
  const Plan base = default_plan(planning_view(og, options), hw.name, kMaxBytes);
  const Plan plan = apply_offload(og, base, options);
  const SimResult keep = simulate(t.graph, default_plan(t.graph, hw.name, kMaxBytes), hw);
  ASSERT_TRUE(keep.valid) << keep.reason;
  // Within the keep-all peak less the Adam moments, which left the device.
  const uint64_t budget = keep.peak_bytes[0] - 2 * weight;
  const SimResult sim = require_fit(og.graph, hw, plan, budget, "test");
  // The CPU steps 3 x 512 x 512 parameters (not the step counter's one
  // element nor its kernels one by one).
  EXPECT_NEAR(sim.host_compute_time, 3.0 * static_cast<double>(elements) / hw.cpu_adam_params_per_s,
              1e-12);
  EXPECT_EQ(sim.bytes_moved[static_cast<size_t>(Resource::kD2H)], 3 * weight);
  EXPECT_EQ(sim.bytes_moved[static_cast<size_t>(Resource::kH2D)], 3 * weight);
}

// ZeRO keeps each run of ops: every op reads the gradient's shard and does
// 1/N of the work on 1/N of the temporaries; offloading on top simulates.
TEST(TracedSteps, ZeroShardsEachRun) {
  TracedAdam t = traced_adam();
  // The lerp_ reads the gradient: its call must name the shard from stage 2.
  for (size_t i = 0; i < 3; ++i) {
    t.graph.ops[t.steps[i][1]].call = fmt::format(
        R"({{"op":"aten::lerp_","overload":"Scalar","args":[{{"t":{}}},{{"t":{}}},0.1]}})",
        t.states[i][1], t.grads[i]);
  }
  const Hardware& hw = find_gpu("a100-40g");
  for (const int stage : {0, 1, 2, 3}) {
    SCOPED_TRACE(stage);
    const Graph r = zero_rank_graph(t.graph, {.ranks = 4, .stage = stage});
    validate(r);
    const std::vector<ModelState> steps = model_states(r);
    ASSERT_EQ(steps.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      const ModelState& s = steps[i];
      ASSERT_EQ(s.ops.size(), 8u);
      const uint64_t temp = r.buffers[s.temps[0]].bytes;
      EXPECT_EQ(temp, stage == 0 ? t.graph.buffers[t.temps[i][0]].bytes
                                 : t.graph.buffers[t.temps[i][0]].bytes / 4);
      const Op& lerp = r.ops[s.ops[1]];
      EXPECT_DOUBLE_EQ(lerp.flops, t.graph.ops[t.steps[i][1]].flops / (stage == 0 ? 1 : 4));
      EXPECT_EQ(r.buffers[s.grad].name,
                stage >= 2 ? fmt::format("w{}.grad.shard", i) : fmt::format("w{}.grad", i));
      const nlohmann::json call = nlohmann::json::parse(lerp.call);
      EXPECT_EQ(call["args"][1]["t"].get<BufferId>(), s.grad);
      EXPECT_EQ(call["args"][0]["t"].get<BufferId>(), t.states[i][1]);
      // Adam's step count is replicated (every rank counts steps); its
      // moments are cut to 1/N.
      EXPECT_EQ(r.buffers[t.states[i][0]].bytes, 4u);
      EXPECT_EQ(r.buffers[t.states[i][1]].bytes,
                t.graph.buffers[t.states[i][1]].bytes / (stage == 0 ? 1 : 4));
    }
    const SimResult sim = simulate(r, default_plan(r, hw.name, kMaxBytes), hw);
    EXPECT_TRUE(sim.valid) << sim.reason;
    if (stage < 2) continue;
    // As DeepSpeed ships them: ZeRO-Offload on stage 2, parameters too on 3.
    const OffloadOptions o{.optimizer = Tier::kHost,
                           .params = stage == 3 ? Tier::kHost : Tier::kDevice};
    const OffloadGraph og = offload_graph(r, o);
    validate(og.graph);
    const Plan plan = apply_offload(og, default_plan(planning_view(og, o), hw.name, kMaxBytes), o);
    const SimResult off = simulate(og.graph, plan, hw);
    EXPECT_TRUE(off.valid) << off.reason;
  }
  // One rank: the graph as it is, traced ops and all.
  const Graph one = zero_rank_graph(t.graph, {.ranks = 1, .stage = 0});
  ASSERT_EQ(one.ops.size(), t.graph.ops.size());
  for (size_t i = 0; i < one.ops.size(); ++i) EXPECT_EQ(one.ops[i].name, t.graph.ops[i].name);
}

// Shards are whole elements: 5x5 fp32 weights over 4 ranks are 7 elements
// (28 bytes) each, not ceil(100 / 4) = 25 bytes; the executor slices its
// views by elements (Note [Shards at run time] in src/exec/executor_comm.cc).
TEST(TracedSteps, ZeroShardsAreWholeElements) {
  const TracedAdam t = traced_adam(8, 5);
  const Graph r = zero_rank_graph(t.graph, {.ranks = 4, .stage = 3});
  validate(r);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(t.graph.buffers[t.params[i]].bytes, 100u);
    EXPECT_EQ(r.buffers[t.params[i]].bytes, 28u);
    EXPECT_EQ(r.buffers[t.states[i][1]].bytes, 28u);
    EXPECT_EQ(r.buffers[t.states[i][2]].bytes, 28u);
  }
}

TEST(TracedSteps, StepsThatAreNotRunsNameTheOp) {
  const auto expect_error = [](const Graph& g, const std::string& what) {
    const std::string e = steps_error(g);
    EXPECT_NE(e.find(what), std::string::npos) << e;
    EXPECT_THROW(fuse_optimizer_steps(g), Error);
    EXPECT_THROW(offload_graph(g, {.optimizer = Tier::kHost}), Error);
  };
  {  // A multi-tensor step: one op updates every parameter.
    TracedAdam t = traced_adam();
    Op& last = t.graph.ops.back();
    last.updates = {t.params[0], t.params[1], t.params[2]};
    expect_error(t.graph,
                 R"(op 35 ("w2.addcdiv_") updates 3 parameters: a multi-tensor (foreach))");
  }
  {  // Kernels of two parameters interleaved: w1's lerp_ inside w0's run.
    TracedAdam t = traced_adam();
    std::swap(t.graph.ops[19], t.graph.ops[21]);
    for (size_t i = 0; i < t.graph.ops.size(); ++i) t.graph.ops[i].id = static_cast<OpId>(i);
    expect_error(t.graph, R"(op 19 ("w1.lerp_") reads buffer)");
  }
  {  // An optimizer op after the last parameter update.
    TracedAdam t = traced_adam();
    testing::GraphBuilder b;
    b.graph = t.graph;
    b.op("lr_scheduler", Phase::kOptimizer, {}, {}, {t.states[2][0]});
    expect_error(b.graph, R"(op 36 ("lr_scheduler") is an optimizer op after the last one)");
  }
  {  // A step that reads no gradient.
    TracedAdam t = traced_adam();
    t.graph.ops[13].in.clear();
    t.graph.ops[15].in.clear();
    expect_error(t.graph, R"(op 19 ("w0.addcdiv_") ends the optimizer step of buffer 0 ("w0"), )"
                          "which reads no gradient");
  }
  {  // A temporary of a step read after it.
    TracedAdam t = traced_adam();
    testing::GraphBuilder b;
    b.graph = t.graph;
    b.op("probe", Phase::kComm, {t.temps[0][1]}, {});
    expect_error(b.graph, R"(op 36 ("probe") uses buffer)");
  }
  {  // A state of a step read in forward (ZeRO would shard it under the reader).
    TracedAdam t = traced_adam();
    t.graph.ops[2].in.push_back(t.states[1][1]);
    expect_error(t.graph, R"(op 2 ("f1") uses buffer)");
  }
}

}  // namespace
}  // namespace memwall
