// DeepSpeed's host buffers (Note [Host buffers of the published systems] in
// src/swap/deepspeed_buffers.cc), gradients that wait on NVMe
// (OffloadOptions::gradients_to_nvme) and the host thread that waits for
// its write-backs (Note [Synchronous write-backs] in src/sim/simulator.cc).
#include "memwall/swap/deepspeed_buffers.h"
#include "offload_test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "memwall/base/error.h"
#include "memwall/hw/hardware.h"
#include "memwall/plan/builders.h"
#include "memwall/plan/plan.h"
#include "memwall/sim/simulator.h"
#include "memwall/swap/offload.h"

namespace memwall {
namespace {

using namespace offload_test;  // NOLINT(google-build-using-namespace)

constexpr size_t kHostTier = static_cast<size_t>(Tier::kHost);

// GPT-2 small: 124,439,808 parameters, the token embedding tied to the head
// (Radford et al. 2019; Hugging Face's gpt2 model card), its largest
// tensor 50,257 x 768 = 38,597,376 elements. 16-bit parameters.
constexpr uint64_t kGpt2Params = 124'439'808;
constexpr uint64_t kGpt2Largest = 50'257 * 768;

uint64_t total(const std::vector<HostReserve>& reserved) {
  uint64_t bytes = 0;
  for (const HostReserve& r : reserved) bytes += r.bytes;
  return bytes;
}

// Stage 1/2 ZeRO-Offload: an fp32 gradient per element the CPU steps
// (single_partition_of_fp32_groups[i].grad) and the pinned 16-bit staging
// of the largest parameter (temp_grad_buffer_for_cpu_offload).
TEST(DeepSpeedBuffers, ZeroOffloadHoldsFp32GradientsAndOneStagingBuffer) {
  const OffloadOptions offload{.optimizer = Tier::kHost};
  const OffloadGraph og = offload_graph(gpt2(), offload);
  const std::vector<HostReserve> r = deepspeed_host_buffers(og, offload, /*stage=*/0);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].what, "DeepSpeed's fp32 gradients for CPU Adam");
  EXPECT_EQ(r[0].bytes, 4 * kGpt2Params);
  EXPECT_EQ(r[1].bytes, 2 * kGpt2Largest);
  // Stage 3 keeps the fp32 gradients and no staging buffer.
  const std::vector<HostReserve> three = deepspeed_host_buffers(og, offload, 3);
  ASSERT_EQ(three.size(), 1u);
  EXPECT_EQ(three[0].bytes, 4 * kGpt2Params);
}

// ZeRO-Infinity with DeepSpeed's defaults (offload_config.py, config.py):
// 4 fp32 optimizer swap buffers of the largest sub-group (the whole model
// here, under sub_group_size 1e9), 5 parameter buffers of 1e8 16-bit
// elements, and up to max_in_cpu = 1e9 parameter elements kept in memory.
TEST(DeepSpeedBuffers, InfinityHoldsSwapBuffersSizedByItsConfig) {
  const OffloadOptions infinity{.optimizer = Tier::kNvme, .params = Tier::kNvme};
  const OffloadGraph og = offload_graph(gpt2(), infinity);
  const std::vector<HostReserve> r = deepspeed_host_buffers(og, infinity, 3);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].bytes, 4 * kGpt2Params * 4);
  EXPECT_EQ(r[1].bytes, uint64_t{5} * 100'000'000 * 2);
  EXPECT_EQ(r[2].bytes, 2 * kGpt2Params);
  // A smaller sub-group and fewer buffers, as a config would set them.
  const std::vector<HostReserve> small = deepspeed_host_buffers(
      og, infinity, 3,
      {.sub_group_size = 1'000'000, .param_buffer_count = 2, .optimizer_buffer_count = 5});
  EXPECT_EQ(small[0].bytes, uint64_t{5} * 1'000'000 * 4);
  EXPECT_EQ(small[1].bytes, uint64_t{2} * 100'000'000 * 2);
  // Nothing offloaded, nothing held.
  EXPECT_TRUE(deepspeed_host_buffers(og, {}, 3).empty());
}

TEST(DeepSpeedBuffers, SizesThatOverflowAreRefused) {
  const OffloadOptions infinity{.optimizer = Tier::kNvme, .params = Tier::kNvme};
  const OffloadGraph og = offload_graph(gpt2(), infinity);
  EXPECT_THROW(deepspeed_host_buffers(og, infinity, 3, {.param_buffer_count = uint64_t{1} << 62}),
               Error);
}

// Plan::host_reserved is in the simulated host peak, exactly, and a
// reserve the host cannot hold fails the plan naming the host.
TEST(DeepSpeedBuffers, TheSimulatorCountsTheReserveInTheHostPeak) {
  const OffloadOptions offload{.optimizer = Tier::kHost};
  const OffloadGraph og = offload_graph(gpt2(), offload);
  const Hardware& hw = find_gpu("rtx4090");
  Plan plan = apply_offload(og, default_plan(og.graph, hw.name, kMaxBytes), offload);
  const SimResult without = simulate(og.graph, plan, hw);
  plan.host_reserved = deepspeed_host_buffers(og, offload, 0);
  const SimResult with = simulate(og.graph, plan, hw);
  ASSERT_TRUE(without.valid) << without.reason;
  ASSERT_TRUE(with.valid) << with.reason;
  EXPECT_EQ(with.peak_bytes[kHostTier], without.peak_bytes[kHostTier] + total(plan.host_reserved));
  Hardware small = hw;
  small.host_memory_bytes = without.peak_bytes[kHostTier] + total(plan.host_reserved) / 2;
  const SimResult over = simulate(og.graph, plan, small);
  EXPECT_FALSE(over.valid);
  EXPECT_NE(over.reason.find("host memory exceeds"), std::string::npos) << over.reason;
  // The reserve alone overfills it: the error says so, not the first step.
  small.host_memory_bytes = total(plan.host_reserved) - 1;
  const SimResult start = simulate(og.graph, plan, small);
  EXPECT_FALSE(start.valid);
  EXPECT_NE(start.reason.find(fmt::format("before the first op, the buffers placed on the host and "
                                          "{} bytes of host buffers (host_reserved): host memory "
                                          "exceeds the host's {} bytes",
                                          total(plan.host_reserved), small.host_memory_bytes)),
            std::string::npos)
      << start.reason;
}

// Under steps after backward, gradients whose states live on NVMe wait
// there and come back with the states: the host holds the states being
// stepped, not every gradient, and the gradients cross the NVMe link
// once each way.
TEST(DeepSpeedBuffers, GradientsWaitOnNvmeWithTheirStates) {
  OffloadOptions host_wait{.optimizer = Tier::kNvme, .steps_after_backward = true};
  OffloadOptions nvme_wait = host_wait;
  nvme_wait.gradients_to_nvme = true;
  const OffloadGraph og = offload_graph(gpt2(), host_wait);
  const Hardware& hw = find_gpu("rtx4090");
  const Plan base = default_plan(og.graph, hw.name, kMaxBytes);
  const SimResult on_host = simulate(og.graph, apply_offload(og, base, host_wait), hw);
  const Plan parked = apply_offload(og, base, nvme_wait);
  const SimResult on_nvme = simulate(og.graph, parked, hw);
  ASSERT_TRUE(on_host.valid) << on_host.reason;
  ASSERT_TRUE(on_nvme.valid) << on_nvme.reason;
  uint64_t grads = 0;
  for (const OffloadedState& o : og.states) grads += og.graph.buffers[o.grad].bytes;
  EXPECT_EQ(on_nvme.bytes_moved[kNvmeWrite], on_host.bytes_moved[kNvmeWrite] + grads);
  EXPECT_EQ(on_nvme.bytes_moved[kNvmeRead], on_host.bytes_moved[kNvmeRead] + grads);
  EXPECT_GE(on_host.peak_bytes[kHostTier], grads);
  EXPECT_LT(on_nvme.peak_bytes[kHostTier], on_host.peak_bytes[kHostTier]);
  size_t out = 0, in = 0;
  for (const Step& s : parked.steps) {
    out += s.kind == StepKind::kSwapOut && s.to == Tier::kNvme ? 1 : 0;
    in += s.kind == StepKind::kSwapIn && s.to == Tier::kHost ? 1 : 0;
  }
  size_t state_buffers = 0;
  for (const OffloadedState& o : og.states) state_buffers += o.states.size();
  // Each parameter's states and its gradient come in; its gradient went
  // out to NVMe, its states go back.
  EXPECT_EQ(in, state_buffers + og.states.size());
  EXPECT_EQ(out, state_buffers + og.states.size());
}

// Note [Synchronous write-backs]: with every optimizer state on NVMe and
// no read-ahead beyond the next step, the CPU phase reads, steps and writes
// one parameter at a time, so the iteration lasts at least the reads and
// writes of the states end to end.
TEST(DeepSpeedBuffers, TheHostThreadWaitsForItsWriteBacks) {
  const OffloadOptions infinity{.optimizer = Tier::kNvme, .steps_after_backward = true};
  const OffloadGraph og = offload_graph(gpt2(), infinity);
  const Hardware& hw = find_gpu("rtx4090");
  const SimResult r = simulate(
      og.graph, apply_offload(og, default_plan(og.graph, hw.name, kMaxBytes), infinity), hw);
  ASSERT_TRUE(r.valid) << r.reason;
  uint64_t states = 0;
  for (const OffloadedState& o : og.states) {
    for (const BufferId s : o.states) states += og.graph.buffers[s].bytes;
  }
  const double serial = static_cast<double>(states) / hw.nvme_read_bandwidth +
                        static_cast<double>(states) / hw.nvme_write_bandwidth;
  EXPECT_GE(r.iteration_time, serial);
}

}  // namespace
}  // namespace memwall
