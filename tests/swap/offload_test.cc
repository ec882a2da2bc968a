// ZeRO-Offload and ZeRO-Infinity (Notes [Offloaded optimizer step] and
// [Offload steps] in src/swap/offload.cc): the rewritten step, the traffic
// each option adds (exact byte counts), and plans accepted by the simulator.
#include "memwall/swap/offload.h"
#include "offload_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "memwall/base/error.h"
#include "memwall/graph/counts.h"
#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/plan/builders.h"
#include "memwall/sim/simulator.h"
#include "memwall/swap/zero.h"

namespace memwall {
namespace {

using namespace offload_test;  // NOLINT(google-build-using-namespace)

struct Totals {
  uint64_t params = 0, grads = 0, states = 0, updates = 0, elements = 0, largest_state = 0;
};
Totals totals(const OffloadGraph& og) {
  Totals t;
  for (const OffloadedState& o : og.states) {
    t.params += og.graph.buffers[o.param].bytes;
    t.grads += og.graph.buffers[o.grad].bytes;
    if (o.update >= 0) t.updates += og.graph.buffers[o.update].bytes;
    for (const BufferId s : o.states) t.states += og.graph.buffers[s].bytes;
    t.elements += element_count(og.graph.buffers[o.param]);
  }
  return t;
}

SimResult run_offload(const Graph& graph, const OffloadOptions& options, const Hardware& hw) {
  const OffloadGraph og = offload_graph(graph, options);
  const Plan base = default_plan(og.graph, hw.name, kMaxBytes);
  return simulate(og.graph, apply_offload(og, base, options), hw);
}

TEST(Offload, RewritesEachStepIntoACpuStepAndADeviceCopy) {
  const OffloadGraph og = offload_graph(gpt2(), {.optimizer = Tier::kHost});
  validate(og.graph);
  ASSERT_EQ(og.states.size(), model_states(gpt2()).size());
  for (const OffloadedState& o : og.states) {
    const Op& step = og.graph.ops[o.step];
    const Op& apply = og.graph.ops[o.apply];
    EXPECT_EQ(o.apply, o.step + 1);
    EXPECT_EQ(step.in.size(), 1u);
    EXPECT_EQ(step.in[0], o.grad);
    EXPECT_EQ(step.out.size(), 1u);
    EXPECT_EQ(step.out[0], o.update);
    EXPECT_EQ(step.updates.size(), 3u);  // bf16 Adam: master, exp_avg, exp_avg_sq
    EXPECT_EQ(apply.updates.size(), 1u);
    EXPECT_EQ(apply.updates[0], o.param);
    EXPECT_EQ(og.graph.buffers[o.update].bytes, og.graph.buffers[o.param].bytes);
  }
  // fp32 training has no master copy: the CPU step keeps one.
  const Graph fp32 =
      build_model("gpt2-small", {.batch = 1, .seq = 64, .precision = Precision::kFp32});
  const OffloadGraph og32 = offload_graph(fp32, {.optimizer = Tier::kHost});
  for (const OffloadedState& o : og32.states) {
    EXPECT_EQ(o.states.size(), 3u);
    EXPECT_EQ(og32.graph.buffers[o.states.back()].bytes, og32.graph.buffers[o.param].bytes);
  }
  // Parameters off the device: the CPU step updates them itself.
  const OffloadGraph at_home =
      offload_graph(gpt2(), {.optimizer = Tier::kHost, .params = Tier::kHost});
  EXPECT_EQ(at_home.graph.ops.size(), gpt2().ops.size());
  for (const OffloadedState& o : at_home.states) {
    EXPECT_EQ(o.apply, kNoOp);
    EXPECT_EQ(at_home.graph.ops[o.step].updates.back(), o.param);
  }
}

// ZeRO-Offload moves each gradient out once and each new parameter in once
// (2 + 2 bytes per parameter in bf16: Ren et al. 2021, sec. 4.1) and keeps
// the 12 bytes of fp32 states per parameter on the host.
TEST(Offload, ZeroOffloadTrafficIsTwoBytesEachWay) {
  const OffloadOptions offload{.optimizer = Tier::kHost};
  const Totals t = totals(offload_graph(gpt2(), offload));
  const Hardware& hw = find_gpu("rtx4090");
  const SimResult base = run_offload(gpt2(), {}, hw);
  const SimResult r = run_offload(gpt2(), offload, hw);
  ASSERT_TRUE(base.valid) << base.reason;
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.bytes_moved[kD2H], t.grads);
  EXPECT_EQ(r.bytes_moved[kH2D], t.updates);
  EXPECT_EQ(t.updates, t.params);
  EXPECT_EQ(t.states, 12 * t.elements);
  EXPECT_GE(r.peak_bytes[static_cast<size_t>(Tier::kHost)], t.states);
  // The states left the device.
  EXPECT_LE(r.peak_bytes[0] + t.states, base.peak_bytes[0] + t.updates);
  EXPECT_GT(r.host_compute_time, 0);
}

TEST(Offload, InfinityReadsAndWritesStatesAndParametersOnNvme) {
  const OffloadOptions infinity{.optimizer = Tier::kNvme, .params = Tier::kNvme};
  const Totals t = totals(offload_graph(gpt2(), infinity));
  const Hardware& hw = find_gpu("rtx4090");
  const SimResult r = run_offload(gpt2(), infinity, hw);
  ASSERT_TRUE(r.valid) << r.reason;
  // The CPU step reads each state and parameter once and writes it back
  // once; the device reads each parameter once per run of its users (the
  // position embedding has one, in forward; most have two; the tied token
  // embedding three: lookup, head, head's backward).
  EXPECT_EQ(r.bytes_moved[kNvmeWrite], t.states + t.params);
  EXPECT_GT(r.bytes_moved[kNvmeRead], t.states + 2 * t.params);
  EXPECT_LT(r.bytes_moved[kNvmeRead], t.states + 4 * t.params);
  EXPECT_EQ(r.bytes_moved[kD2H], t.grads);
  EXPECT_EQ(t.updates, 0u);  // no apply: the CPU writes the parameter at home
  // Parameters come to the device only while used: far below their total.
  const SimResult on_device = run_offload(gpt2(), {}, hw);
  EXPECT_LT(r.peak_bytes[0], on_device.peak_bytes[0] - t.states - t.params / 2);
}

// Note [Optimizer chunks]: a share of the optimizer states' bytes on the
// host, the rest on NVMe, in chunks spread over the steps; exactly the NVMe
// chunks cross the NVMe link, once each way, whatever the read-ahead.
TEST(Offload, OptimizerChunksSplitBetweenHostAndNvme) {
  const OffloadOptions nvme{.optimizer = Tier::kNvme};
  const OffloadGraph og = offload_graph(gpt2(), nvme);
  const Totals t = totals(og);
  const Hardware& hw = find_gpu("rtx4090");
  EXPECT_EQ(split_optimizer_states(og, 0.0), std::vector<Tier>(og.states.size(), Tier::kNvme));
  EXPECT_EQ(split_optimizer_states(og, 1.0), std::vector<Tier>(og.states.size(), Tier::kHost));
  // One chunk per state (1-byte chunks): the host's running share never
  // passes 40% by more than half the largest state so far.
  const std::vector<Tier> tiers = split_optimizer_states(og, 0.4, 1);
  uint64_t on_host = 0, total = 0, runs_of_nvme = 0, largest = 0;
  for (size_t k = 0; k < tiers.size(); ++k) {
    const uint64_t bytes = optimizer_state_bytes(og, k);
    largest = std::max(largest, bytes);
    total += bytes;
    if (tiers[k] == Tier::kHost) on_host += bytes;
    if (tiers[k] == Tier::kNvme && (k == 0 || tiers[k - 1] == Tier::kHost)) ++runs_of_nvme;
    EXPECT_LE(static_cast<double>(on_host),
              0.4 * static_cast<double>(total) + static_cast<double>(largest) / 2 + 1);
  }
  EXPECT_EQ(total, t.states);
  EXPECT_GE(runs_of_nvme, 10u);  // interleaved (17 runs here), not one block
  uint64_t nvme_bytes = 0;
  for (size_t k = 0; k < tiers.size(); ++k) {
    if (tiers[k] == Tier::kNvme) nvme_bytes += optimizer_state_bytes(og, k);
  }
  for (const int ahead : {1, 3, 1000}) {
    OffloadOptions split = nvme;
    split.optimizer_of = tiers;
    split.nvme_read_ahead = ahead;
    const Plan plan = apply_offload(og, default_plan(og.graph, hw.name, kMaxBytes), split);
    const SimResult r = simulate(og.graph, plan, hw);
    ASSERT_TRUE(r.valid) << r.reason;
    EXPECT_EQ(r.bytes_moved[kNvmeRead], nvme_bytes) << ahead;
    EXPECT_EQ(r.bytes_moved[kNvmeWrite], nvme_bytes) << ahead;
    for (size_t k = 0; k < tiers.size(); ++k) {
      for (const BufferId b : og.states[k].states) EXPECT_EQ(plan.placement.at(b), tiers[k]);
    }
  }
  // Bad splits are refused.
  OffloadOptions wrong = nvme;
  wrong.optimizer_of = {Tier::kHost};
  EXPECT_THROW(apply_offload(og, default_plan(og.graph, hw.name, kMaxBytes), wrong), Error);
  wrong.optimizer_of = std::vector<Tier>(og.states.size(), Tier::kDevice);
  EXPECT_THROW(apply_offload(og, default_plan(og.graph, hw.name, kMaxBytes), wrong), Error);
  wrong = nvme;
  wrong.nvme_read_ahead = 0;
  EXPECT_THROW(apply_offload(og, default_plan(og.graph, hw.name, kMaxBytes), wrong), Error);
  EXPECT_THROW(split_optimizer_states(og, 1.5), Error);
}

TEST(Offload, ParametersOnTheHostWithZeroThree) {
  const Graph rank = zero_rank_graph(gpt2(), {.ranks = 4, .stage = 3});
  const Hardware& hw = find_gpu("a100-40g");
  const SimResult r = run_offload(rank, {.optimizer = Tier::kHost, .params = Tier::kHost}, hw);
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_GT(r.comm_time, 0);
}

// Note [Offloaded shards]: under ZeRO-2 each rank's CPU steps its 1/N shard,
// so the update it sends back (and an fp32 master) is a shard, as the
// optimizer states are.
TEST(Offload, ZeroTwoStepsTheRanksShardOnTheHost) {
  const Graph rank = zero_rank_graph(gpt2(), {.ranks = 4, .stage = 2});
  const OffloadGraph og = offload_graph(rank, {.optimizer = Tier::kHost});
  ASSERT_FALSE(og.states.empty());
  for (const OffloadedState& o : og.states) {
    const Buffer& p = og.graph.buffers[o.param];
    const uint64_t shard = (element_count(p) + 3) / 4;
    ASSERT_GE(o.update, 0);
    EXPECT_EQ(og.graph.buffers[o.update].bytes, shard * dtype_size(p.dtype)) << p.name;
    for (const BufferId st : o.states) {
      EXPECT_LE(og.graph.buffers[st].bytes, shard * 4) << og.graph.buffers[st].name;
    }
  }
  const Hardware& hw = find_gpu("a100-40g");
  const SimResult r = run_offload(rank, {.optimizer = Tier::kHost}, hw);
  ASSERT_TRUE(r.valid) << r.reason;
}

TEST(Offload, PlanningViewWeighsOnlyWhatStaysOnTheDevice) {
  const OffloadGraph og = offload_graph(gpt2(), {.optimizer = Tier::kHost});
  const Graph view = planning_view(og, {.optimizer = Tier::kHost});
  ASSERT_EQ(view.buffers.size(), og.graph.buffers.size());
  for (const OffloadedState& o : og.states) {
    EXPECT_EQ(view.buffers[o.grad].bytes, 0u);
    EXPECT_EQ(view.buffers[o.states[0]].bytes, 0u);
    EXPECT_EQ(view.buffers[o.param].bytes, og.graph.buffers[o.param].bytes);
  }
  EXPECT_THROW(offload_graph(gpt2(), {.params = Tier::kHost}), Error);
}

}  // namespace
}  // namespace memwall
