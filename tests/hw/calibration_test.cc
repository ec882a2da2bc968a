// A calibrated profile (memwall/hw/calibration.h): the measurements over
// the base, and a graph's timed rounds folded into measured kernels.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "memwall/base/error.h"
#include "memwall/graph/calls.h"
#include "memwall/hw/calibration.h"
#include "memwall/hw/hardware.h"

namespace memwall {
namespace {

// Note [Measuring copy contention]: a step of A seconds alone takes L beside
// copies busy a share f of L; compute at 1/c speed while they run gives
// A = L (1 - f) + L f / c. Rows worked by hand from that equation.
TEST(CalibrateContention, ComputeSlowdownSolvesTheModel) {
  struct Row {
    double alone, loaded, share, slowdown;
  };
  for (const Row& r : {
           Row{0.8, 1.0, 0.4, 2.0},    // 0.8 = 0.6 + 0.4 / 2
           Row{0.7, 1.0, 0.5, 2.5},    // 0.7 = 0.5 + 0.5 / 2.5
           Row{0.9, 1.0, 0.1, 100.0},  // no work done beside the copies at all
           Row{0.5, 1.0, 0.1, 100.0},  // slower than the model allows: the cap
           Row{1.0, 1.0, 0.3, 1.0},    // no slower
           Row{1.1, 1.0, 0.3, 1.0},    // faster beside the load: drift, not contention
           Row{1.0, 1.2, 0.0, 1.0},    // no copies ran: nothing to say
       }) {
    EXPECT_NEAR(compute_slowdown(r.alone, r.loaded, r.share), r.slowdown, 1e-9)
        << r.alone << " " << r.loaded << " " << r.share;
  }
  EXPECT_EQ(Hardware::CopyContention::kMaxSlowdown, 100.0);
}

const nlohmann::json kCpuProbe = {
    {"device", "cpu"},
    {"threads", 2},
    {"torch", "2.9.0"},
    {"matmul", {{"fp32", {{"flops_per_s", 1e11}}}, {"bf16", {{"flops_per_s", 2e11}}}}},
    {"memory_bytes_per_s", 2e10},
    {"conv2d_fp32", {{"flops_per_s", 5e10}}}};

TEST(Calibration, TheProfileIsTheMeasurementsOverItsBase) {
  EXPECT_THROW(parse_compute_probe("{}"), Error);
  EXPECT_THROW(parse_compute_probe("not json"), Error);
  const nlohmann::json probe = parse_compute_probe(kCpuProbe.dump());
  EXPECT_FALSE(probe_is_gpu(probe));
  EXPECT_EQ(builtin_for_probe(probe), nullptr);
  const Hardware& base = find_gpu("l4");
  const Hardware hw = calibrated_profile(base, probe,
                                         {.h2d_gbps = 5,
                                          .d2h_gbps = 6,
                                          .copy_latency_s = 2e-5,
                                          .nvme_write_gbps = 1,
                                          .nvme_read_gbps = 2,
                                          .cpu_adam_params_per_s = 3e8,
                                          .host_memory_bytes = uint64_t{16} << 30});
  EXPECT_EQ(hw.name, "calibrated-cpu");
  EXPECT_EQ(hw.description, "measured by memwall calibrate on the CPU (2 threads, torch 2.9.0)");
  EXPECT_TRUE(hw.device_is_host_cpu);
  EXPECT_EQ(hw.device_memory_bytes, uint64_t{16} << 30);  // the emulated device is the host's
  EXPECT_EQ(hw.host_memory_bytes, uint64_t{16} << 30);
  EXPECT_EQ(hw.peak_flops_fp32, 1e11);
  EXPECT_EQ(hw.peak_flops_bf16, 2e11);
  EXPECT_EQ(hw.peak_flops_tf32, 0.0);  // the probe did not measure it
  EXPECT_EQ(hw.hbm_bandwidth, 2e10);
  EXPECT_EQ(hw.compute_efficiency, 1.0);
  EXPECT_EQ(hw.memory_efficiency, 1.0);
  EXPECT_EQ(hw.h2d_bandwidth, 5e9);
  EXPECT_EQ(hw.d2h_bandwidth, 6e9);
  EXPECT_EQ(hw.host_pcie_bandwidth, 6e9);
  EXPECT_EQ(hw.pcie_latency, 2e-5);
  EXPECT_EQ(hw.nvme_write_bandwidth, 1e9);
  EXPECT_EQ(hw.nvme_read_bandwidth, 2e9);
  EXPECT_EQ(hw.cpu_adam_params_per_s, 3e8);
  EXPECT_EQ(hw.gpus_per_node, 1);
  // What one machine cannot show stays the base's.
  EXPECT_EQ(hw.interconnect_bandwidth, base.interconnect_bandwidth);
  EXPECT_EQ(hw.launch_latency, base.launch_latency);
  EXPECT_EQ(calibration_fields_from_base().size(), 5u);
  (void)hardware_from_json(hardware_to_json(hw));  // what --gpu-file reads back
}

// An addmm call record of `rows` rows on buffers 1, 2, 3.
std::string addmm(int rows) {
  const auto tensor = [](int id, nlohmann::json size) {
    return nlohmann::json{{"t", id}, {"size", size}, {"offset", 0}, {"dtype", "Float"}};
  };
  return nlohmann::json{{"op", "aten::addmm"},
                        {"overload", ""},
                        {"args", {tensor(1, {64}), tensor(2, {rows, 32}), tensor(3, {32, 64})}},
                        {"kwargs", nlohmann::json::object()},
                        {"results", {4}}}
      .dump();
}

// Note [The typical round]: the kernels of the round whose step is the
// median; ops of one signature are one kernel, their mean.
TEST(Calibration, RoundsFoldIntoTheTypicalRoundsKernels) {
  Graph g;
  for (int i = 0; i < 3; ++i) {
    Op op;
    op.id = i;
    op.call = addmm(i < 2 ? 8 : 16);  // ops 0 and 1: one kernel
    g.ops.push_back(op);
  }
  const std::vector<KernelRound> rounds = {{.kernel_seconds = {1, 3, 5},
                                            .step_s = 3,
                                            .overhead_s = 0.3,
                                            .loaded_step_s = 3,
                                            .load_busy_share = 0.5,
                                            .copy_alone_s = 1,
                                            .copy_beside_s = 1},
                                           {.kernel_seconds = {2, 4, 6},
                                            .step_s = 1,
                                            .overhead_s = 0.9,
                                            .loaded_step_s = 1,
                                            .load_busy_share = 0.5,
                                            .copy_alone_s = 1,
                                            .copy_beside_s = 3},
                                           {.kernel_seconds = {3, 5, -1},
                                            .step_s = 2,
                                            .overhead_s = 0.6,
                                            .loaded_step_s = 2.5,
                                            .load_busy_share = 0.5,
                                            .copy_alone_s = 1,
                                            .copy_beside_s = 2}};
  const KernelMeasure m = fold_kernel_rounds(g, rounds);
  // The typical round is the third (steps 1, 2, 3): op 2 untimed there.
  EXPECT_EQ(m.ops, 2u);
  EXPECT_EQ(m.seconds, 8.0);
  ASSERT_EQ(m.kernels.size(), 1u);
  EXPECT_EQ(m.kernels.begin()->first, kernel_signature(addmm(8)));
  EXPECT_EQ(m.kernels.begin()->second, 4.0);
  EXPECT_DOUBLE_EQ(m.op_overhead, 0.3);  // 0.6 s over its 2 ops
  EXPECT_EQ(m.contention.copy, 2.0);     // the median of 1, 3, 2
  // Compute: the rounds' 1, 1 and 5/3 (2 = 2.5 (1 - 0.5) + 2.5 * 0.5 / c): the median.
  EXPECT_NEAR(m.contention.compute, 1.0, 1e-12);

  Hardware hw = find_gpu("l4");
  hw.device_is_host_cpu = true;
  add_measured_kernels(hw, m);
  EXPECT_EQ(hw.kernel_seconds.at(kernel_signature(addmm(8))), 4.0);
  EXPECT_EQ(hw.copy_contention, m.contention);
  EXPECT_DOUBLE_EQ(hw.op_overhead, 0.3);
  EXPECT_TRUE(fold_kernel_rounds(g, {}).kernels.empty());
}

}  // namespace
}  // namespace memwall
