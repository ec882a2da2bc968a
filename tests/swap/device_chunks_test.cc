// Device chunks (Note [Device chunks] in src/swap/offload.cc) and the order
// of the applies (Note [Offload steps]): which states the split keeps on the
// device, the rewrite that leaves their steps alone, the plan that runs each
// right after its gradient, exact traffic, and plans the simulator accepts.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/plan/builders.h"
#include "memwall/sim/simulator.h"
#include "memwall/swap/offload.h"
#include "offload_test_util.h"

namespace memwall {
namespace {

using namespace offload_test;  // NOLINT(google-build-using-namespace)

// A split of gpt2-small's states with one chunk per state: 30% of the bytes
// on the device, 40% on the host, the rest on NVMe.
OffloadOptions split_options(Tier params) {
  OffloadOptions o{.optimizer = Tier::kNvme, .params = params};
  o.optimizer_of = split_optimizer_states(offload_graph(gpt2(), o), 0.4, 1, true, 0.3);
  return o;
}

TEST(DeviceChunks, TheDeviceTakesTheFirstStatesInStepOrder) {
  const OffloadGraph og = offload_graph(gpt2(), {.optimizer = Tier::kNvme});
  const std::vector<Tier> tiers = split_optimizer_states(og, 0.4, 1, true, 0.3);
  const auto all = static_cast<double>(optimizer_state_bytes(og));
  double device = 0, host = 0, largest = 0;
  size_t prefix = 0;
  while (prefix < tiers.size() && tiers[prefix] == Tier::kDevice) ++prefix;
  for (size_t k = 0; k < tiers.size(); ++k) {
    const auto bytes = static_cast<double>(optimizer_state_bytes(og, k));
    largest = std::max(largest, bytes);
    if (tiers[k] == Tier::kDevice) device += bytes;
    if (tiers[k] == Tier::kHost) host += bytes;
    if (k >= prefix) {  // one run, from the first
      EXPECT_NE(tiers[k], Tier::kDevice) << k;
    }
  }
  EXPECT_GT(prefix, 0u);
  EXPECT_LE(device, 0.3 * all + largest / 2);
  EXPECT_GT(device, 0.3 * all - largest / 2);
  EXPECT_NEAR(host, 0.4 * all, largest);
  // Without a device share the split is the host / NVMe one; shares above
  // 1 in all are refused.
  EXPECT_EQ(split_optimizer_states(og, 0.4, 1, true, 0), split_optimizer_states(og, 0.4, 1));
  EXPECT_EQ(split_optimizer_states(og, 0, 1, true, 1),
            std::vector<Tier>(og.states.size(), Tier::kDevice));
  EXPECT_THROW(split_optimizer_states(og, 0.8, 1, true, 0.3), Error);
  EXPECT_THROW(split_optimizer_states(og, 0.4, 1, true, -0.1), Error);
}

TEST(DeviceChunks, TheirStepsStayOnTheDeviceAndWeighThere) {
  const OffloadOptions options = split_options(Tier::kHost);
  const OffloadGraph og = offload_graph(gpt2(), options);
  const OffloadGraph cpu = offload_graph(gpt2(), {.optimizer = Tier::kNvme});
  ASSERT_EQ(og.states.size(), cpu.states.size());
  const Graph view = planning_view(og, options);
  for (size_t k = 0; k < og.states.size(); ++k) {
    const OffloadedState& o = og.states[k];
    const Op& step = og.graph.ops[o.step];
    EXPECT_EQ(o.on_device, options.optimizer_of[k] == Tier::kDevice) << k;
    EXPECT_EQ(o.update, -1) << k;  // parameters off the device: no update either way
    EXPECT_EQ(o.apply, kNoOp) << k;
    // A device step updates its parameter in place; a CPU step updates it
    // at home too here (parameters on the host).
    EXPECT_NE(std::find(step.updates.begin(), step.updates.end(), o.param), step.updates.end());
    EXPECT_EQ(view.buffers[o.grad].bytes, 0u) << k;  // stepped as soon as it is complete
    if (o.on_device) {
      EXPECT_EQ(view.buffers[o.param].bytes, og.graph.buffers[o.param].bytes) << k;
      for (const BufferId s : o.states) {
        EXPECT_EQ(view.buffers[s].bytes, og.graph.buffers[s].bytes) << k;
      }
    } else {
      EXPECT_EQ(view.buffers[o.param].bytes, 0u) << k;
      EXPECT_EQ(view.buffers[o.states[0]].bytes, 0u) << k;
    }
  }
  // A split that names device chunks applied to a graph rewritten without
  // them, or the reverse, is refused.
  EXPECT_THROW(apply_offload(cpu, default_plan(cpu.graph, "a100-40g", kMaxBytes), options), Error);
}

// With the parameters on the device: exactly the CPU-stepped parameters'
// gradients go down and updates come up, exactly the NVMe chunks cross the
// drive, and each device step runs right after its gradient is complete,
// before the first apply.
TEST(DeviceChunks, ExactTrafficAndEachStepRightAfterItsGradient) {
  const OffloadOptions options = split_options(Tier::kDevice);
  const OffloadGraph og = offload_graph(gpt2(), options);
  const Plan plan = apply_offload(og, default_plan(og.graph, "a100-40g", kMaxBytes), options);
  const SimResult r = simulate(og.graph, plan, find_gpu("a100-40g"));
  ASSERT_TRUE(r.valid) << r.reason;
  uint64_t grads = 0, updates = 0, on_nvme = 0;
  size_t device_steps = 0;
  for (size_t k = 0; k < og.states.size(); ++k) {
    const OffloadedState& o = og.states[k];
    if (options.optimizer_of[k] == Tier::kNvme) on_nvme += optimizer_state_bytes(og, k);
    if (o.on_device) {
      ++device_steps;
      continue;
    }
    grads += og.graph.buffers[o.grad].bytes;
    updates += og.graph.buffers[o.update].bytes;
  }
  ASSERT_GT(device_steps, 0u);
  EXPECT_EQ(og.graph.ops.size(), gpt2().ops.size() + og.states.size() - device_steps);
  EXPECT_EQ(r.bytes_moved[kD2H], grads);
  EXPECT_EQ(r.bytes_moved[kH2D], updates);
  EXPECT_EQ(r.bytes_moved[kNvmeRead], on_nvme);
  EXPECT_EQ(r.bytes_moved[kNvmeWrite], on_nvme);
  // Where each op is computed in the plan.
  std::map<OpId, size_t> at;
  size_t first_apply = plan.steps.size();
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    if (s.kind != StepKind::kCompute) continue;
    at[s.op] = i;
    if (og.graph.ops[s.op].name.ends_with(".apply")) first_apply = std::min(first_apply, i);
  }
  for (const OffloadedState& o : og.states) {
    if (!o.on_device) continue;
    ASSERT_TRUE(at.count(o.step));
    const size_t i = at[o.step];
    EXPECT_EQ(plan.steps[i].on, Tier::kDevice);
    EXPECT_LT(i, first_apply);
    ASSERT_LT(i + 1, plan.steps.size());
    EXPECT_EQ(plan.steps[i + 1].kind, StepKind::kFree);
    EXPECT_EQ(plan.steps[i + 1].buf, o.grad);
    // After every device op that writes its gradient or reads its parameter.
    for (const Op& op : og.graph.ops) {
      if (op.phase == Phase::kOptimizer || !at.count(op.id)) continue;
      const bool writes =
          std::find(op.out.begin(), op.out.end(), o.grad) != op.out.end() ||
          std::find(op.updates.begin(), op.updates.end(), o.grad) != op.updates.end();
      const bool reads = std::find(op.in.begin(), op.in.end(), o.param) != op.in.end();
      if (writes || reads) {
        EXPECT_LT(at[op.id], i) << op.name;
      }
    }
    EXPECT_EQ(plan.placement.count(o.states[0]) ? plan.placement.at(o.states[0]) : Tier::kDevice,
              Tier::kDevice);
  }
  // The same split with the parameters on the host simulates too.
  const OffloadOptions off = split_options(Tier::kHost);
  const OffloadGraph og_off = offload_graph(gpt2(), off);
  const SimResult r_off = simulate(
      og_off.graph, apply_offload(og_off, default_plan(og_off.graph, "a100-40g", kMaxBytes), off),
      find_gpu("a100-40g"));
  EXPECT_TRUE(r_off.valid) << r_off.reason;
}

// Note [Offload steps]: the applies run in the order of their CPU steps, so
// each update goes up as soon as its step is done, under the CPU steps
// still to come, not after the last one.
TEST(DeviceChunks, UpdatesGoUpInTheOrderTheirCpuStepsRun) {
  const OffloadOptions options{.optimizer = Tier::kHost};
  const OffloadGraph og = offload_graph(gpt2(), options);
  const Plan plan = apply_offload(og, default_plan(og.graph, "a100-40g", kMaxBytes), options);
  std::map<OpId, size_t> state_of;
  for (size_t k = 0; k < og.states.size(); ++k) {
    state_of[og.states[k].step] = k;
    state_of[og.states[k].apply] = k;
  }
  std::vector<size_t> cpu_order, apply_order;
  for (const Step& s : plan.steps) {
    if (s.kind != StepKind::kCompute || !state_of.count(s.op)) continue;
    (s.on == Tier::kHost ? cpu_order : apply_order).push_back(state_of[s.op]);
  }
  ASSERT_EQ(cpu_order.size(), og.states.size());
  EXPECT_EQ(apply_order, cpu_order);
  EXPECT_NE(cpu_order.front(), 0u);  // backward steps the last parameters first
  const SimResult r = simulate(og.graph, plan, find_gpu("a100-40g"), {.record_timeline = true});
  ASSERT_TRUE(r.valid) << r.reason;
  double first_h2d = r.iteration_time, last_cpu = 0;
  for (const Span& s : r.timeline) {
    if (s.resource == Resource::kH2D) first_h2d = std::min(first_h2d, s.start);
    if (s.resource == Resource::kHostCpu) last_cpu = std::max(last_cpu, s.end);
  }
  EXPECT_LT(first_h2d, last_cpu);
}

}  // namespace
}  // namespace memwall
