// The simulator on hand-built graphs with known answers (Note [Simulation
// model] in src/sim/simulator.cc). Times and bandwidths are powers of two so
// every expected figure is exact in floating point.
#include "memwall/sim/simulator.h"

#include "memwall/graph/graph.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "../graph/graph_builder.h"
#include "memwall/plan/builders.h"
#include "sim_test_util.h"

namespace memwall {
namespace {

using testing::GraphBuilder;

TEST(Simulator, ComputeChainTakesTheSumOfOpTimes) {
  const SwapGraph s = swap_graph(1, 2, 0.5);
  const SimResult r = simulate(s.graph, default_plan(s.graph, "test", 1 << 20), test_hardware());
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.iteration_time, 3.5);
  EXPECT_EQ(r.compute_time, 3.5);
  EXPECT_EQ(r.compute_busy_fraction, 1.0);
  EXPECT_EQ(r.transfer_stall_time, 0.0);
  EXPECT_EQ(r.peak_bytes[0], 1032u);
}

TEST(Simulator, SwapOutHiddenUnderComputeCostsNothing) {
  const SwapGraph s = swap_graph(1, 2, 1);
  // d2h of a: 1 s, from the end of op 0 (t=1) to t=2, under op 1 (t=1..3);
  // swap_in: t=2..3, ready when op 2 starts.
  const Plan plan =
      make_plan({Step::compute(0), Step::swap_out(s.a), Step::compute(1), Step::swap_in(s.a),
                 Step::compute(2), Step::free(s.a), Step::free(s.b)});
  const SimResult r = simulate(s.graph, plan, test_hardware());
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.iteration_time, 4.0);
  EXPECT_EQ(r.transfer_stall_time, 0.0);
  EXPECT_EQ(r.bytes_moved[static_cast<size_t>(Resource::kD2H)], 1024u);
  EXPECT_EQ(r.bytes_moved[static_cast<size_t>(Resource::kH2D)], 1024u);
  EXPECT_EQ(r.peak_bytes[1], 1024u);  // the host copy
}

// Note [Host pool blocks]: with SimOptions::host_block_bytes, a host copy
// counts as whole blocks; the bounce buffers of an NVMe swap too. The
// device and the time are as without.
TEST(Simulator, HostBlocksRoundEachHostBuffer) {
  const SwapGraph s = swap_graph(1, 2, 1);  // a: 1024 bytes
  const Plan plan =
      make_plan({Step::compute(0), Step::swap_out(s.a), Step::compute(1), Step::swap_in(s.a),
                 Step::compute(2), Step::free(s.a), Step::free(s.b)});
  const SimResult bytes = simulate(s.graph, plan, test_hardware());
  const SimResult pages = simulate(s.graph, plan, test_hardware(), {.host_block_bytes = 4096});
  const SimResult three = simulate(s.graph, plan, test_hardware(), {.host_block_bytes = 3000});
  ASSERT_TRUE(pages.valid) << pages.reason;
  EXPECT_EQ(bytes.peak_bytes[1], 1024u);
  EXPECT_EQ(pages.peak_bytes[1], 4096u);
  EXPECT_EQ(three.peak_bytes[1], 3000u);
  EXPECT_EQ(pages.peak_bytes[0], bytes.peak_bytes[0]);
  EXPECT_EQ(pages.iteration_time, bytes.iteration_time);
  const Plan nvme =
      make_plan({Step::compute(0), Step::swap_out(s.a, Tier::kNvme), Step::compute(1),
                 Step::swap_in(s.a), Step::compute(2), Step::free(s.a), Step::free(s.b)});
  const SimResult bounced = simulate(s.graph, nvme, test_hardware(), {.host_block_bytes = 4096});
  ASSERT_TRUE(bounced.valid) << bounced.reason;
  EXPECT_EQ(bounced.peak_bytes[1], 2u * 4096);  // both bounce buffers, as pages
  EXPECT_EQ(bounced.peak_bytes[2], 1024u);      // NVMe as it is
}

TEST(Simulator, SwapOutLongerThanComputeStallsByTheDifference) {
  GraphBuilder g;
  const BufferId a = g.buffer("a", 3072, BufferKind::kActivation);  // 3 s to copy
  g.op("f0", Phase::kForward, {}, {a});
  g.op("f1", Phase::kForward, {}, {});
  set_times(g.graph, {1, 2});
  const Plan plan =
      make_plan({Step::compute(0), Step::swap_out(a), Step::compute(1), Step::free(a)});
  const SimResult r = simulate(g.graph, plan, test_hardware());
  ASSERT_TRUE(r.valid) << r.reason;
  // Compute ends at 3; the copy runs 1..4: one second (3 - 2) longer.
  EXPECT_EQ(r.iteration_time, 4.0);
  EXPECT_EQ(r.compute_time, 3.0);
  EXPECT_EQ(r.compute_busy_fraction, 0.75);
}

TEST(Simulator, LateSwapInStallsTheConsumerByTheRemainingTransfer) {
  GraphBuilder g;
  const BufferId a = g.buffer("a", 1024, BufferKind::kActivation);  // 1 s each way
  g.op("f0", Phase::kForward, {}, {a});
  g.op("f1", Phase::kForward, {}, {});
  g.op("f2", Phase::kForward, {}, {});
  g.op("bwd", Phase::kBackward, {a}, {});
  set_times(g.graph, {1, 4, 0.25, 1});
  // The swap_in issues when f2 starts (t=5): ready at 6, f2 ends at 5.25.
  const Plan plan =
      make_plan({Step::compute(0), Step::swap_out(a), Step::compute(1), Step::compute(2),
                 Step::swap_in(a), Step::compute(3), Step::free(a)});
  const SimResult r = simulate(g.graph, plan, test_hardware());
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.transfer_stall_time, 0.75);
  EXPECT_EQ(r.iteration_time, 1 + 4 + 0.25 + 0.75 + 1);
  // Issued one op earlier (at f1's start, t=1), the host copy is ready at 2
  // and the swap_in ends at 3, long before bwd: no stall.
  const Plan early =
      make_plan({Step::compute(0), Step::swap_out(a), Step::compute(1), Step::swap_in(a),
                 Step::compute(2), Step::compute(3), Step::free(a)});
  const SimResult e = simulate(g.graph, early, test_hardware());
  ASSERT_TRUE(e.valid) << e.reason;
  EXPECT_EQ(e.transfer_stall_time, 0.0);
  EXPECT_EQ(e.iteration_time, 6.25);
}

TEST(Simulator, SwapInAllocatesAtIssueSwapOutFreesOnCompletion) {
  const SwapGraph s = swap_graph(1, 2, 1);
  const Plan plan =
      make_plan({Step::compute(0), Step::swap_out(s.a), Step::compute(1), Step::swap_in(s.a),
                 Step::compute(2), Step::free(s.a), Step::free(s.b)});
  const SimResult r = simulate(s.graph, plan, test_hardware());
  ASSERT_TRUE(r.valid) << r.reason;
  // Device: a at t=0 (1024); at t=1 op 1 allocates b and the swap_in,
  // issued at op 1's start, allocates a's incoming copy while the outgoing
  // one is still being copied (2056); the outgoing copy goes at t=2.
  const auto& curve = r.curves[0];
  ASSERT_FALSE(curve.empty());
  EXPECT_EQ(curve.front().time, 0.0);
  EXPECT_EQ(curve.front().bytes, 1024u);
  EXPECT_EQ(r.peak_bytes[0], 2056u);  // a, b and a's incoming copy
  EXPECT_EQ(r.peak_time[0], 1.0);
  EXPECT_EQ(curve.back().bytes, 0u);
}

TEST(Simulator, BudgetExceededByExactlyNBytesAtTheStep) {
  const SwapGraph s = swap_graph(1, 2, 1);
  const SimResult r = simulate(s.graph, default_plan(s.graph, "test", 1030), test_hardware());
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(r.failed_step, 1u);  // compute f1 allocates b
  EXPECT_EQ(r.reason,
            "step 1 (compute): device memory exceeds the budget by 2 bytes (1032 > 1030) at "
            "1.000000 s, allocating buffer 1 (\"b\")");
}

TEST(Simulator, ReadingAFreedOrSwappedOutBufferIsInvalid) {
  const SwapGraph s = swap_graph(1, 2, 1);
  SimResult r = simulate(
      s.graph, make_plan({Step::compute(0), Step::free(s.a), Step::compute(1), Step::compute(2)}),
      test_hardware());
  EXPECT_FALSE(r.valid);
  EXPECT_EQ(r.failed_step, 3u);
  EXPECT_EQ(r.reason,
            "step 3 (compute): op 2 (\"bwd\") reads buffer 0 (\"a\"), which is not on the "
            "device: it was freed at step 1");
  r = simulate(
      s.graph,
      make_plan({Step::compute(0), Step::swap_out(s.a), Step::compute(1), Step::compute(2)}),
      test_hardware());
  EXPECT_EQ(r.reason,
            "step 3 (compute): op 2 (\"bwd\") reads buffer 0 (\"a\"), which is not on the "
            "device: it was swapped out at step 1");
  r = simulate(s.graph, make_plan({Step::compute(2)}), test_hardware());
  EXPECT_EQ(r.reason,
            "step 0 (compute): op 2 (\"bwd\") reads buffer 0 (\"a\"), which is not on the "
            "device: no op has created it yet");
}

TEST(Simulator, ComputeOnceRecomputeAfter) {
  const SwapGraph s = swap_graph(1, 2, 1);
  SimResult r = simulate(s.graph, make_plan({Step::compute(0), Step::compute(0)}), test_hardware());
  EXPECT_EQ(r.reason, "step 1 (compute): op 0 (\"f0\") is computed a second time (use recompute)");
  r = simulate(s.graph, make_plan({Step::recompute(0)}), test_hardware());
  EXPECT_EQ(r.reason, "step 0 (recompute): op 0 (\"f0\") is recomputed before it was computed");
  r = simulate(s.graph, make_plan({Step::compute(0), Step::compute(1)}), test_hardware());
  EXPECT_EQ(r.failed_step, 2u);
  EXPECT_EQ(r.reason, "end of plan: op 2 (\"bwd\") is never computed");
  // Free, then recompute: valid, and the recompute costs its op time.
  r = simulate(s.graph,
               make_plan({Step::compute(0), Step::free(s.a), Step::compute(1), Step::recompute(0),
                          Step::compute(2), Step::free(s.a), Step::free(s.b)}),
               test_hardware());
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.iteration_time, 5.0);
  EXPECT_EQ(r.peak_bytes[0], 1032u);
}

TEST(Simulator, NvmeGoesThroughAHostBounceBuffer) {
  const SwapGraph s = swap_graph(1, 8, 1);
  // Out: d2h 1 s (t=1..2), then NVMe write 2 s (t=2..4). In, issued at op 1's
  // start (t=1): NVMe read 2 s once the copy exists (t=4..6), h2d 1 s (6..7).
  const Plan plan =
      make_plan({Step::compute(0), Step::swap_out(s.a, Tier::kNvme), Step::compute(1),
                 Step::swap_in(s.a), Step::compute(2), Step::free(s.a), Step::free(s.b)});
  const SimResult r = simulate(s.graph, plan, test_hardware());
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.iteration_time, 10.0);  // f1 ends at 9 > 7: hidden
  EXPECT_EQ(r.bytes_moved[static_cast<size_t>(Resource::kNvmeWrite)], 1024u);
  EXPECT_EQ(r.bytes_moved[static_cast<size_t>(Resource::kNvmeRead)], 1024u);
  EXPECT_EQ(r.peak_bytes[2], 1024u);
  EXPECT_EQ(r.peak_bytes[1], 2048u);  // both bounce buffers (issued at t=1)
}

// The plan on a device with its own streams, then on the emulated one
// (Hardware::device_is_host_cpu); both must be valid.
std::pair<SimResult, SimResult> on_stream_and_emulated(const Graph& graph, const Plan& plan,
                                                       Hardware hw) {
  SimResult stream = simulate(graph, plan, hw);
  EXPECT_TRUE(stream.valid) << stream.reason;
  hw.device_is_host_cpu = true;
  SimResult emulated = simulate(graph, plan, hw);
  EXPECT_TRUE(emulated.valid) << emulated.reason;
  return {std::move(stream), std::move(emulated)};
}

// Hardware::device_is_host_cpu: on the emulated device the CPU step and the
// device's kernels share the host's cores, so they do not overlap.
TEST(Simulator, HostComputeSharesTheDeviceWhenTheDeviceIsTheHostCpu) {
  GraphBuilder g;
  const BufferId w = g.buffer("w", 1024, BufferKind::kParam);
  g.graph.buffers[w].shape = {256};  // 1 s of CPU Adam
  const BufferId m = g.buffer("w.m", 1024, BufferKind::kOptimState);
  const BufferId grad = g.buffer("w.grad", 1024, BufferKind::kGrad);
  const BufferId x = g.buffer("x", 1024, BufferKind::kTemp);
  g.op("bwd", Phase::kBackward, {w}, {grad});
  g.op("adam", Phase::kOptimizer, {grad}, {}, {w, m});
  g.op("other", Phase::kBackward, {}, {x});
  g.graph.ops[0].time = 2;  // adam has no measured time: the CPU Adam rate decides
  g.graph.ops[2].time = 2;
  Plan plan = make_plan({Step::compute(0), Step::swap_out(grad), Step::swap_out(w),
                         Step::compute(1, Tier::kHost), Step::compute(2), Step::swap_in(w),
                         Step::free(grad), Step::free(x)});
  plan.placement = {{m, Tier::kHost}};
  const auto [apart, shared] = on_stream_and_emulated(g.graph, plan, test_hardware());
  // Apart: "other" runs t=2..4 beside the copies; Adam t=4..5 on the host;
  // w back t=5..6. Shared: Adam t=4..5 holds the device, "other" t=5..7,
  // and w back t=7..8: the thread that runs "other" issues it after
  // (Note [The emulated device's thread]).
  EXPECT_EQ(apart.iteration_time, 6.0);
  EXPECT_EQ(shared.iteration_time, 8.0);
  EXPECT_EQ(shared.host_compute_time, 1.0);
}

// Note [The emulated device's thread]: the executor's thread waits for a
// swap_out's copy before it brings the buffer back, and runs the next
// kernel only after that. a (1 s each way) goes out after f0 and straight
// back. With a stream: d2h 1..2, h2d 2..3, f1 (2 s) 1..3, bwd 3..4.
// Emulated: the thread waits 1..2, h2d 2..3, f1 2..4, bwd 4..5.
TEST(Simulator, OnTheEmulatedDeviceTheThreadWaitsWhereTheExecutorDoes) {
  const SwapGraph g = swap_graph(1, 2, 1);
  const Plan plan =
      make_plan({Step::compute(0), Step::swap_out(g.a), Step::swap_in(g.a), Step::compute(1),
                 Step::compute(2), Step::free(g.a), Step::free(g.b)});
  const auto [stream, emulated] = on_stream_and_emulated(g.graph, plan, test_hardware());
  EXPECT_EQ(stream.iteration_time, 4.0);
  EXPECT_EQ(stream.transfer_stall_time, 0.0);
  EXPECT_EQ(emulated.iteration_time, 5.0);
  EXPECT_EQ(emulated.transfer_stall_time, 1.0);
  EXPECT_EQ(emulated.waiting[static_cast<size_t>(Resource::kD2H)], 1.0);
}

// Note [Copy latency]: the emulated engine's worker pays the latency (0.5 s
// here) only when it was idle. a and b (1 s each way) go out after f0 and
// come back for bwd. Emulated: d2h a 1..2.5, b queued 2.5..3.5; f1 1..5;
// h2d a 5..6.5 (the engine was idle), b 6.5..7.5; bwd 7.5..8.5. With a
// stream every copy pays it: d2h 1..2.5, 2.5..4; h2d 2.5..4, 4..5.5
// (issued at f1's start); bwd 5.5..6.5.
TEST(Simulator, OnTheEmulatedDeviceOnlyACopyToAnIdleEnginePaysItsLatency) {
  GraphBuilder g;
  const BufferId a = g.buffer("a", 1024, BufferKind::kActivation);
  const BufferId b = g.buffer("b", 1024, BufferKind::kActivation);
  g.op("f0", Phase::kForward, {}, {a, b});
  g.op("f1", Phase::kForward, {}, {});
  g.op("bwd", Phase::kBackward, {a, b}, {});
  set_times(g.graph, {1, 4, 1});
  const Plan plan = make_plan({Step::compute(0), Step::swap_out(a), Step::swap_out(b),
                               Step::compute(1), Step::swap_in(a), Step::swap_in(b),
                               Step::compute(2), Step::free(a), Step::free(b)});
  Hardware hw = test_hardware();
  hw.pcie_latency = 0.5;
  const auto [stream, emulated] = on_stream_and_emulated(g.graph, plan, hw);
  EXPECT_EQ(stream.iteration_time, 6.5);
  EXPECT_EQ(emulated.iteration_time, 8.5);
  EXPECT_EQ(emulated.transfer_stall_time, 2.5);
}

// Note [Op overhead]: the emulated device's thread does the executor's
// bookkeeping for each device op (0.25 s here) besides its kernel; a device
// with its own stream hides it. Three ops of 1, 2 and 1 s: 4 s, or 4.75 s.
TEST(Simulator, OnTheEmulatedDeviceEachOpAlsoCostsTheExecutorsOverhead) {
  const SwapGraph g = swap_graph(1, 2, 1);
  const Plan plan = make_plan(
      {Step::compute(0), Step::compute(1), Step::compute(2), Step::free(g.a), Step::free(g.b)});
  Hardware hw = test_hardware();
  hw.op_overhead = 0.25;
  const auto [stream, emulated] = on_stream_and_emulated(g.graph, plan, hw);
  EXPECT_EQ(stream.iteration_time, 4.0);
  EXPECT_EQ(emulated.iteration_time, 4.75);
  EXPECT_EQ(emulated.compute_time, 4.75);
}

TEST(Simulator, HostOptimizerStepAndPersistentBuffersEndWhereTheyStarted) {
  GraphBuilder g;
  const BufferId w = g.buffer("w", 1024, BufferKind::kParam);
  g.graph.buffers[w].shape = {256};  // 256 fp32 parameters: 1 s of CPU Adam
  const BufferId m = g.buffer("w.m", 1024, BufferKind::kOptimState);
  const BufferId grad = g.buffer("w.grad", 1024, BufferKind::kGrad);
  g.op("fwd_bwd", Phase::kBackward, {w}, {grad});
  g.op("adam", Phase::kOptimizer, {grad}, {}, {w, m});
  set_times(g.graph, {2});  // adam has no measured time: the CPU Adam rate decides
  Plan plan = make_plan({Step::compute(0), Step::swap_out(grad), Step::swap_out(w),
                         Step::compute(1, Tier::kHost), Step::swap_in(w), Step::free(grad)});
  plan.placement = {{m, Tier::kHost}};
  const SimResult r = simulate(g.graph, plan, test_hardware());
  ASSERT_TRUE(r.valid) << r.reason;
  // grad copies out t=2..3, w t=3..4 (w's read ends at 2); Adam on the host
  // t=4..5; w back t=5..6.
  EXPECT_EQ(r.host_compute_time, 1.0);
  EXPECT_EQ(r.iteration_time, 6.0);
  // Without bringing w back, it ends on the host, not where it started.
  plan.steps.erase(plan.steps.begin() + 4);
  const SimResult bad = simulate(g.graph, plan, test_hardware());
  EXPECT_FALSE(bad.valid);
  EXPECT_EQ(bad.failed_step, plan.steps.size());
  EXPECT_EQ(bad.reason,
            "end of plan: buffer 0 (\"w\") started on the device but has no copy there at the "
            "end (it was swapped out at step 2); the next iteration needs it where it started");
}

// Note [Offsets per stay]: a parameter swapped out and back may come back
// elsewhere only if it ends where it started.
TEST(Simulator, PersistentStateEndsAtTheOffsetItStartedAt) {
  GraphBuilder g;
  const BufferId w = g.buffer("w", 1024, BufferKind::kParam);
  g.graph.buffers[w].shape = {256};
  const BufferId m = g.buffer("w.m", 1024, BufferKind::kOptimState);
  const BufferId grad = g.buffer("w.grad", 1024, BufferKind::kGrad);
  g.op("fwd_bwd", Phase::kBackward, {w}, {grad});
  g.op("adam", Phase::kOptimizer, {grad}, {}, {w, m});
  set_times(g.graph, {2});
  Plan plan = make_plan({Step::compute(0), Step::swap_out(grad), Step::swap_out(w),
                         Step::compute(1, Tier::kHost), Step::swap_in(w), Step::free(grad)},
                        4096);
  plan.placement = {{m, Tier::kHost}};
  plan.offsets = {{w, 0}, {grad, 1024}};
  plan.stay_offsets = {{w, {0}}};
  EXPECT_TRUE(simulate(g.graph, plan, test_hardware()).valid);
  plan.stay_offsets = {{w, {2048}}};
  EXPECT_EQ(simulate(g.graph, plan, test_hardware()).reason,
            "end of plan: buffer 0 (\"w\") ends at offset 2048 but started at offset 0; the next "
            "iteration needs it where it started");
}

TEST(Simulator, FreeingTheOnlyCopyOfAParameterIsInvalid) {
  GraphBuilder g;
  const BufferId w = g.buffer("w", 64, BufferKind::kParam);
  g.op("f", Phase::kForward, {w}, {});
  const SimResult r =
      simulate(g.graph, make_plan({Step::compute(0), Step::free(w)}), test_hardware());
  EXPECT_EQ(r.reason,
            "step 1 (free): frees the only copy of buffer 0 (\"w\"), which the next iteration "
            "needs");
}

TEST(Simulator, OffsetsMustNotOverlapWhileCoResident) {
  const SwapGraph s = swap_graph(1, 2, 1);
  Plan plan = default_plan(s.graph, "test", 2048);
  plan.offsets = {{s.a, 0}, {s.b, 1024}};
  SimResult r = simulate(s.graph, plan, test_hardware());
  ASSERT_TRUE(r.valid) << r.reason;
  plan.offsets = {{s.a, 0}, {s.b, 1016}};
  r = simulate(s.graph, plan, test_hardware());
  EXPECT_EQ(r.reason,
            "step 1 (compute): buffer 1 (\"b\") at offset 1016 overlaps buffer 0 (\"a\") at "
            "offset 0, which is still allocated");
  plan.offsets = {{s.a, 0}};
  r = simulate(s.graph, plan, test_hardware());
  EXPECT_EQ(r.reason,
            "step 1 (compute): buffer 1 (\"b\") has no offset for its device stay 0, but the plan "
            "pins addresses");
}

// swap_out(a) copies from t=1 to t=2 (d2h 1024 B/s), but swap_in(a) is
// issued right behind it and allocates at once: the incoming copy shares a's
// one address with the outgoing one, which is sound because it starts only
// when the host copy exists (t=2).
TEST(Simulator, ASwapInWhileItsSwapOutIsInFlightKeepsItsAddress) {
  const SwapGraph s = swap_graph(1, 2, 1);
  Plan plan = make_plan({Step::compute(0), Step::swap_out(s.a), Step::swap_in(s.a),
                         Step::compute(1), Step::compute(2), Step::free(s.a), Step::free(s.b)},
                        4096);
  plan.offsets = {{s.a, 0}, {s.b, 1024}};
  const SimResult r = simulate(s.graph, plan, test_hardware(), {.record_residency = true});
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.peak_bytes[0], 2 * 1024u + 8);  // both stays count until the outgoing one ends
  ASSERT_EQ(r.residencies.size(), 3u);
  EXPECT_EQ(r.residencies[0].buf, s.a);
  EXPECT_EQ(r.residencies[1].buf, s.a);
  EXPECT_LT(r.residencies[1].alloc_seq, r.residencies[0].release_seq);  // co-resident
  EXPECT_EQ(r.residencies[0].release_time, 2.0);
  // b must still not overlap a while either copy of a holds the address.
  plan.offsets = {{s.a, 0}, {s.b, 1000}};
  EXPECT_FALSE(simulate(s.graph, plan, test_hardware()).valid);
}

// Note [Offsets per stay]: a's incoming copy (allocated at t=1, while the
// outgoing one holds [0, 1024) until t=2) gets its own address, and op 2's
// workspace its own, each checked against everything allocated then.
TEST(Simulator, EachStayAndEachWorkspaceRunHasItsOwnAddress) {
  SwapGraph s = swap_graph(1, 2, 1);
  s.graph.ops[2].workspace = 16;
  Plan plan = make_plan({Step::compute(0), Step::swap_out(s.a), Step::compute(1),
                         Step::swap_in(s.a), Step::compute(2), Step::free(s.a), Step::free(s.b)},
                        4096);
  plan.offsets = {{s.a, 0}, {s.b, 1024}};
  plan.stay_offsets = {{s.a, {1032}}};
  plan.workspace_offsets = {{2, {0}}};  // a's first stay has left by t=3
  SimResult r = simulate(s.graph, plan, test_hardware(), {.record_residency = true});
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.peak_bytes[0], 2 * 1024u + 8);
  ASSERT_EQ(r.workspaces.size(), 1u);
  EXPECT_EQ(r.workspaces[0].op, 2);
  EXPECT_EQ(r.workspaces[0].alloc_time, 3.0);
  EXPECT_EQ(r.workspaces[0].release_time, 4.0);
  plan.stay_offsets = {{s.a, {512}}};
  EXPECT_EQ(simulate(s.graph, plan, test_hardware()).reason,
            "step 3 (swap_in): buffer 0 (\"a\") at offset 512 overlaps buffer 1 (\"b\") at "
            "offset 1024, which is still allocated");
  plan.stay_offsets = {{s.a, {1032}}};
  plan.workspace_offsets = {{2, {1030}}};
  EXPECT_EQ(simulate(s.graph, plan, test_hardware()).reason,
            "step 4 (compute): the workspace of op 2 (\"bwd\") at offset 1030 overlaps buffer 0 "
            "(\"a\") at offset 1032, which is still allocated");
  plan.workspace_offsets = {{2, {2056, 0}}};  // one per run: this one has a single run
  EXPECT_TRUE(simulate(s.graph, plan, test_hardware()).valid);
  plan.stay_offsets = {{s.a, {}}};
  EXPECT_EQ(simulate(s.graph, plan, test_hardware()).reason,
            "step 3 (swap_in): buffer 0 (\"a\") has no offset for its device stay 1, but the "
            "plan pins addresses");
}

// Note [Waiting for an address]: b placed where a's outgoing copy still
// reads (d2h t=1..2) waits for it, as the executor does, instead of being
// rejected: op 1 runs t=2..4, the swap-in t=2..3, op 2 t=4..5. Placed over
// a live buffer it is still an overlap.
TEST(Simulator, AStayWaitsForTheOutgoingCopyOfItsRange) {
  const SwapGraph s = swap_graph(1, 2, 1);
  Plan plan = make_plan({Step::compute(0), Step::swap_out(s.a), Step::compute(1),
                         Step::swap_in(s.a), Step::compute(2), Step::free(s.a), Step::free(s.b)},
                        4096);
  plan.offsets = {{s.a, 0}, {s.b, 1024}};
  plan.stay_offsets = {{s.a, {1032}}};
  const SimResult apart = simulate(s.graph, plan, test_hardware());
  ASSERT_TRUE(apart.valid) << apart.reason;
  EXPECT_EQ(apart.iteration_time, 4.0);
  EXPECT_EQ(apart.transfer_stall_time, 0.0);
  plan.offsets[s.b] = 0;
  const SimResult waited = simulate(s.graph, plan, test_hardware());
  ASSERT_TRUE(waited.valid) << waited.reason;
  EXPECT_EQ(waited.iteration_time, 5.0);
  EXPECT_EQ(waited.transfer_stall_time, 1.0);
  plan.offsets[s.b] = 1032;  // a's second stay's address, live from t=2
  plan.stay_offsets = {{s.a, {1028}}};
  EXPECT_EQ(simulate(s.graph, plan, test_hardware()).reason,
            "step 3 (swap_in): buffer 0 (\"a\") at offset 1028 overlaps buffer 1 (\"b\") at "
            "offset 1032, which is still allocated");
}

// Note [Workspace span]: a plan holds an op's span while the op runs (the
// simulator counts and places it); the eager memory profile, like PyTorch's
// allocator, counts the workspace.
TEST(Simulator, AWorkspaceSitsOnItsSpanAndCountsItsBytes) {
  SwapGraph s = swap_graph(1, 2, 1);
  s.graph.ops[2].workspace = 16;
  s.graph.ops[2].workspace_span = 40;
  const SimResult kept = simulate(s.graph, default_plan(s.graph, "test", 4096), test_hardware());
  ASSERT_TRUE(kept.valid) << kept.reason;
  EXPECT_EQ(kept.peak_bytes[0], 1024u + 8 + 40);
  EXPECT_EQ(memory_profile(s.graph).peak_bytes, 1024u + 8 + 16);
  // A run without offsets (an allocator) holds the workspace.
  const SimResult live = simulate(s.graph, default_plan(s.graph, "test", 4096), test_hardware(),
                                  {.live_scratch = true});
  EXPECT_EQ(live.peak_bytes[0], 1024u + 8 + 16);
  Plan plan = make_plan({Step::compute(0), Step::swap_out(s.a), Step::compute(1),
                         Step::swap_in(s.a), Step::compute(2), Step::free(s.a), Step::free(s.b)},
                        4096);
  plan.offsets = {{s.a, 0}, {s.b, 1024}};
  plan.stay_offsets = {{s.a, {1032}}};
  plan.workspace_offsets = {{2, {2056}}};
  const SimResult r = simulate(s.graph, plan, test_hardware());
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.peak_bytes[0], 2 * 1024u + 8);  // both stays of a, during the swap
  EXPECT_EQ(pinned_arena(plan, s.graph), 2056u + 40);
  // 16 bytes at 992 end before b at 1024; its span does not.
  plan.workspace_offsets = {{2, {992}}};
  EXPECT_EQ(simulate(s.graph, plan, test_hardware()).reason,
            "step 4 (compute): the workspace of op 2 (\"bwd\") at offset 992 overlaps buffer 1 "
            "(\"b\") at offset 1024, which is still allocated");
  plan.workspace_offsets = {{2, {984}}};
  EXPECT_TRUE(simulate(s.graph, plan, test_hardware()).valid);
}

// A buffer still on the device at the end (a persistent one here) ends its
// stay after every other release.
TEST(Simulator, StaysOpenAtTheEndCloseLast) {
  GraphBuilder g;
  const BufferId w = g.buffer("w", 64, BufferKind::kParam);
  const BufferId x = g.buffer("x", 32, BufferKind::kActivation);
  g.op("f", Phase::kForward, {w}, {x});
  g.op("b", Phase::kBackward, {x}, {});
  set_times(g.graph, {1, 1});
  const SimResult r = simulate(g.graph, default_plan(g.graph, "test", 1024), test_hardware(),
                               {.record_residency = true});
  ASSERT_TRUE(r.valid) << r.reason;
  ASSERT_EQ(r.residencies.size(), 2u);
  EXPECT_EQ(r.residencies[0].buf, w);
  EXPECT_EQ(r.residencies[1].buf, x);
  EXPECT_LT(r.residencies[1].release_seq, r.residencies[0].release_seq);
  EXPECT_EQ(r.residencies[0].release_seq, 3u);  // events: alloc w, alloc x, release x
  EXPECT_EQ(r.residencies[0].release_time, r.iteration_time);
}

TEST(Simulator, ResidenciesOrderAllocationsAndReleases) {
  const SwapGraph s = swap_graph(1, 2, 1);
  const Plan plan =
      make_plan({Step::compute(0), Step::swap_out(s.a), Step::compute(1), Step::swap_in(s.a),
                 Step::compute(2), Step::free(s.a), Step::free(s.b)});
  const SimResult r = simulate(s.graph, plan, test_hardware(), {.record_residency = true});
  ASSERT_TRUE(r.valid) << r.reason;
  // a (t=0), b and a's incoming copy (t=1), a's outgoing copy released
  // (t=2), then both released after op 2 (t=4), in plan order.
  ASSERT_EQ(r.residencies.size(), 3u);
  const Residency& out = r.residencies[0];
  const Residency& b = r.residencies[1];
  const Residency& in = r.residencies[2];
  EXPECT_EQ(out.buf, s.a);
  EXPECT_EQ(b.buf, s.b);
  EXPECT_EQ(in.buf, s.a);
  EXPECT_EQ(out.alloc_seq, 0u);
  EXPECT_EQ(b.alloc_seq, 1u);
  EXPECT_EQ(in.alloc_seq, 2u);
  EXPECT_EQ(out.release_seq, 3u);
  EXPECT_EQ(out.release_time, 2.0);
  EXPECT_EQ(in.release_seq, 4u);
  EXPECT_EQ(b.release_seq, 5u);
  EXPECT_EQ(in.release_time, 4.0);
}

TEST(Simulator, TimelineHasOneSpanPerBusyStep) {
  const SwapGraph s = swap_graph(1, 2, 1);
  const Plan plan =
      make_plan({Step::compute(0), Step::swap_out(s.a), Step::compute(1), Step::swap_in(s.a),
                 Step::compute(2), Step::free(s.a), Step::free(s.b)});
  const SimResult r = simulate(s.graph, plan, test_hardware(), {.record_timeline = true});
  ASSERT_EQ(r.timeline.size(), 5u);
  EXPECT_EQ(r.timeline[1].resource, Resource::kD2H);
  EXPECT_EQ(r.timeline[1].step, 1u);
  EXPECT_EQ(r.timeline[1].start, 1.0);
  EXPECT_EQ(r.timeline[1].end, 2.0);
  EXPECT_EQ(r.timeline[3].resource, Resource::kH2D);
  EXPECT_EQ(r.timeline[3].start, 2.0);
}

// A collective runs on its own stream: issued first, it overlaps op 0 and
// does not move the cursor; op 2 waits for its output.
TEST(Simulator, CollectivesRunOnTheirOwnStream) {
  GraphBuilder g;
  const BufferId shard = g.buffer("w.shard", 512, BufferKind::kParam);
  const BufferId x = g.buffer("x", 8, BufferKind::kActivation);
  const BufferId full = g.buffer("w.full", 1024, BufferKind::kTemp);
  g.op("f0", Phase::kForward, {}, {x});
  g.op("all_gather", Phase::kComm, {shard}, {full});
  g.op("f1", Phase::kForward, {x, full}, {});
  g.graph.ops[0].time = 1;
  g.graph.ops[1].bytes = 3072;  // 3 s at 1024 bytes/s one way
  g.graph.ops[2].time = 0.5;
  g.graph.ops[1].type = "all_gather";
  g.graph.meta["zero"] = {{"stage", 3}, {"ranks", 2}};
  Hardware hw = test_hardware();
  hw.interconnect_bandwidth = 2048;  // both directions summed; steps cost nothing here
  hw.gpus_per_node = 2;
  const Plan plan = make_plan(
      {Step::compute(1), Step::compute(0), Step::compute(2), Step::free(x), Step::free(full)});
  const SimResult r = simulate(g.graph, plan, hw, {.record_timeline = true});
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.comm_time, 3.0);
  EXPECT_EQ(r.compute_time, 1.5);
  EXPECT_EQ(r.iteration_time, 3.5);  // f1 waits for the gather (ends at 3)
  EXPECT_EQ(r.transfer_stall_time, 2.0);
  EXPECT_EQ(r.bytes_moved[static_cast<size_t>(Resource::kComm)], 3072u);
  EXPECT_EQ(r.timeline[0].resource, Resource::kComm);
  EXPECT_EQ(r.timeline[1].start, 0.0);  // f0 did not wait for the gather
  EXPECT_EQ(r.peak_bytes[0], 512u + 8 + 1024);
  EXPECT_EQ(collective_time(hw, Collective::kAllGather, 3072, 2), 3.0);
}

// ZeRO-Infinity's optimizer step on one parameter: the gradient made by a
// 1 s backward op is copied to the host, the state m is read from NVMe,
// stepped on the CPU and written back.
struct NvmeStep {
  GraphBuilder g;
  BufferId grad, m;
  Plan plan;
};

NvmeStep nvme_step() {
  NvmeStep c;
  c.grad = c.g.buffer("w.grad", 256, BufferKind::kGrad);
  c.m = c.g.buffer("w.m", 512, BufferKind::kOptimState);  // 128 fp32 elements
  c.g.op("bwd", Phase::kBackward, {}, {c.grad});
  c.g.op("step", Phase::kOptimizer, {c.grad}, {}, {c.m});
  c.g.graph.ops[0].time = 1;
  c.plan = make_plan({Step::compute(0), Step::swap_out(c.grad), Step::swap_in(c.m, Tier::kHost),
                      Step::compute(1, Tier::kHost), Step::swap_out(c.m, Tier::kNvme),
                      Step::free(c.grad)});
  c.plan.placement = {{c.m, Tier::kNvme}};
  return c;
}

// ZeRO-Infinity's optimizer step: the state lives on NVMe, is read into host
// memory, stepped on the CPU and written back.
TEST(Simulator, StatesOnNvmeAreSteppedOnTheHost) {
  auto [g, grad, m, plan] = nvme_step();
  const SimResult r = simulate(g.graph, plan, test_hardware());
  ASSERT_TRUE(r.valid) << r.reason;
  // read m 0..1 (512 B at 512 B/s); grad d2h 1..1.25; CPU step 1.25..1.75
  // (128 / 256 params/s); write back 1.75..2.75.
  EXPECT_EQ(r.iteration_time, 2.75);
  EXPECT_EQ(r.host_compute_time, 0.5);
  EXPECT_EQ(r.bytes_moved[static_cast<size_t>(Resource::kNvmeRead)], 512u);
  EXPECT_EQ(r.bytes_moved[static_cast<size_t>(Resource::kNvmeWrite)], 512u);
  EXPECT_EQ(r.peak_bytes[static_cast<size_t>(Tier::kHost)], 768u);

  // Without the write-back the NVMe copy is stale at the end.
  Plan stale = plan;
  stale.steps.erase(stale.steps.begin() + 4);
  const SimResult s = simulate(g.graph, stale, test_hardware());
  EXPECT_FALSE(s.valid);
  EXPECT_NE(s.reason.find("w.m"), std::string::npos) << s.reason;

  // Reading in what is not on NVMe.
  Plan twice = plan;
  twice.steps.insert(twice.steps.begin() + 3, Step::swap_in(m, Tier::kHost));
  const SimResult t = simulate(g.graph, twice, test_hardware());
  EXPECT_FALSE(t.valid);
  EXPECT_EQ(t.reason, "step 3 (swap_in): buffer 1 (\"w.m\") is already on the host");
}

// A graph of several ranks runs on the rank's share of its node: host
// memory, host<->device and NVMe bandwidth and the CPU are divided among the
// ranks on the node (Note [Ranks on a node] in hw/ranks.cc).
TEST(Simulator, RanksOfANodeShareItsHost) {
  auto [g, grad, m, plan] = nvme_step();
  g.graph.meta["zero"] = {{"stage", 1}, {"ranks", 2}};
  Hardware node = test_hardware();
  node.gpus_per_node = 2;
  node.host_pcie_bandwidth = 1024;  // 512 B/s each for two ranks, below their own 1024
  // As StatesOnNvmeAreSteppedOnTheHost at half the NVMe, PCIe and CPU rates:
  // read m 0..2 (512 B at 256 B/s); grad d2h 1..1.5 (256 B at 512 B/s); CPU
  // step 2..3 (128 params at 128/s); write back 3..5.
  const SimResult r = simulate(g.graph, plan, node);
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.iteration_time, 5.0);
  EXPECT_EQ(r.host_compute_time, 1.0);
  EXPECT_EQ(r.peak_bytes[static_cast<size_t>(Tier::kHost)], 768u);
  // The rank uses 768 host bytes from t = 0 (the copies' destinations are
  // taken at issue): a 1024-byte host fits one rank, not two.
  node.host_memory_bytes = 1024;
  const SimResult shared = simulate(g.graph, plan, node);
  EXPECT_FALSE(shared.valid);
  EXPECT_EQ(shared.reason,
            "step 2 (swap_in): host memory exceeds this rank's 1/2 share of the node's, 512 "
            "bytes, by 256 bytes at 0.000000 s");
  node.gpus_per_node = 1;  // each rank on its own node
  EXPECT_TRUE(simulate(g.graph, plan, node).valid);
}

// Note [Time split]: the compute stream's idle time is charged along the
// critical path, and compute plus the waits is the iteration time.
double waited(const SimResult& r, Resource resource) {
  return r.waiting[static_cast<size_t>(resource)];
}

double split_total(const SimResult& r) {
  double total = r.compute_time;
  for (const double w : r.waiting) total += w;
  return total;
}

TEST(TimeSplit, ALateSwapInIsChargedToTheCopy) {
  GraphBuilder g;
  const BufferId a = g.buffer("a", 1024, BufferKind::kActivation);  // 1 s each way
  g.op("f0", Phase::kForward, {}, {a});
  g.op("f1", Phase::kForward, {}, {});
  g.op("f2", Phase::kForward, {}, {});
  g.op("bwd", Phase::kBackward, {a}, {});
  set_times(g.graph, {1, 4, 0.25, 1});
  // As in LateSwapInStallsTheConsumerByTheRemainingTransfer: the h2d copy
  // runs 5..6, bwd could have started at 5.25.
  const Plan plan =
      make_plan({Step::compute(0), Step::swap_out(a), Step::compute(1), Step::compute(2),
                 Step::swap_in(a), Step::compute(3), Step::free(a)});
  const SimResult r = simulate(g.graph, plan, test_hardware());
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(waited(r, Resource::kH2D), 0.75);
  EXPECT_EQ(waited(r, Resource::kD2H), 0.0);  // the swap-out ran under f1
  EXPECT_EQ(split_total(r), r.iteration_time);
}

TEST(TimeSplit, AnNvmeRoundTripIsSplitBetweenTheReadAndTheCopy) {
  GraphBuilder g;
  const BufferId a = g.buffer("a", 1024, BufferKind::kActivation);
  g.op("f0", Phase::kForward, {}, {a});
  g.op("f1", Phase::kForward, {}, {});
  g.op("bwd", Phase::kBackward, {a}, {});
  set_times(g.graph, {1, 4, 1});
  // d2h 1..2, NVMe write 2..4; the swap_in issues at f1's start (t=1) but
  // its NVMe read waits for the write: read 4..6, h2d 6..7. bwd could start
  // at 5: of its 2 s wait, 1 s is the read and 1 s the copy.
  const Plan plan = make_plan({Step::compute(0), Step::swap_out(a, Tier::kNvme), Step::compute(1),
                               Step::swap_in(a), Step::compute(2), Step::free(a)});
  const SimResult r = simulate(g.graph, plan, test_hardware());
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(r.iteration_time, 8.0);
  EXPECT_EQ(r.compute_time, 6.0);
  EXPECT_EQ(waited(r, Resource::kNvmeRead), 1.0);
  EXPECT_EQ(waited(r, Resource::kH2D), 1.0);
  EXPECT_EQ(waited(r, Resource::kNvmeWrite), 0.0);
  EXPECT_EQ(split_total(r), r.iteration_time);
}

TEST(TimeSplit, ACollectiveWaitIsChargedToCollectives) {
  GraphBuilder g;
  const BufferId shard = g.buffer("w.shard", 512, BufferKind::kParam);
  const BufferId x = g.buffer("x", 8, BufferKind::kActivation);
  const BufferId full = g.buffer("w.full", 1024, BufferKind::kTemp);
  g.op("f0", Phase::kForward, {}, {x});
  g.op("all_gather", Phase::kComm, {shard}, {full});
  g.op("f1", Phase::kForward, {x, full}, {});
  g.graph.ops[0].time = 1;
  g.graph.ops[1].bytes = 3072;  // 3 s, as in CollectivesRunOnTheirOwnStream
  g.graph.ops[2].time = 0.5;
  g.graph.ops[1].type = "all_gather";
  g.graph.meta["zero"] = {{"stage", 3}, {"ranks", 2}};
  Hardware hw = test_hardware();
  hw.interconnect_bandwidth = 2048;
  hw.gpus_per_node = 2;
  const Plan plan = make_plan(
      {Step::compute(1), Step::compute(0), Step::compute(2), Step::free(x), Step::free(full)});
  const SimResult r = simulate(g.graph, plan, hw);
  ASSERT_TRUE(r.valid) << r.reason;
  EXPECT_EQ(waited(r, Resource::kComm), 2.0);  // f1 waits 1..3
  EXPECT_EQ(split_total(r), r.iteration_time);
}

// The tail after the last device step: write-back, host step, gradient copy.
TEST(TimeSplit, TheTailIsChargedBackAlongItsChain) {
  const auto [g, grad, m, plan] = nvme_step();
  const SimResult r = simulate(g.graph, plan, test_hardware());
  ASSERT_TRUE(r.valid) << r.reason;
  // As in StatesOnNvmeAreSteppedOnTheHost: compute 0..1, then grad d2h
  // 1..1.25, CPU step 1.25..1.75, write-back 1.75..2.75 (the read of m,
  // 0..1, ran under compute).
  EXPECT_EQ(r.iteration_time, 2.75);
  EXPECT_EQ(r.compute_time, 1.0);
  EXPECT_EQ(waited(r, Resource::kD2H), 0.25);
  EXPECT_EQ(waited(r, Resource::kHostCpu), 0.5);
  EXPECT_EQ(waited(r, Resource::kNvmeWrite), 1.0);
  EXPECT_EQ(waited(r, Resource::kNvmeRead), 0.0);
  EXPECT_EQ(split_total(r), r.iteration_time);
}

// A copy queued behind another: the wait is the copy engine's, all of it.
TEST(TimeSplit, QueueingBehindACopyIsChargedToItsEngine) {
  GraphBuilder g;
  const BufferId a = g.buffer("a", 2048, BufferKind::kParam);  // 2 s in
  const BufferId b = g.buffer("b", 1024, BufferKind::kParam);  // 1 s in
  g.op("f0", Phase::kForward, {a}, {});
  g.op("f1", Phase::kForward, {b}, {});
  set_times(g.graph, {0.5, 0.5});
  Plan plan = make_plan({Step::swap_in(a), Step::swap_in(b), Step::compute(0), Step::compute(1),
                         Step::free(a), Step::free(b)});
  plan.placement = {{a, Tier::kHost}, {b, Tier::kHost}};
  const SimResult r = simulate(g.graph, plan, test_hardware());
  ASSERT_TRUE(r.valid) << r.reason;
  // a: 0..2; b queued: 2..3. f0 2..2.5 waits 2 s; f1 waits 2.5..3.
  EXPECT_EQ(r.iteration_time, 3.5);
  EXPECT_EQ(waited(r, Resource::kH2D), 2.5);
  EXPECT_EQ(split_total(r), r.iteration_time);
}

}  // namespace
}  // namespace memwall
