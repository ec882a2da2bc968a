// Built-in profiles: order, exact datasheet values, lookup errors.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "memwall/base/error.h"
#include "memwall/hw/hardware.h"
#include "test_util.h"

namespace memwall {
namespace {

TEST(Profiles, OrderAndKeys) {
  std::vector<std::string> names;
  for (const Hardware& hw : builtin_gpus()) names.push_back(hw.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"v100-16g", "v100-32g", "a100-40g", "a100-80g", "h100-80g",
                                      "h200", "l4", "t4", "rtx3090", "rtx4090"}));
}

TEST(Profiles, A100Datasheet) {
  // NVIDIA A100 Tensor Core GPU datasheet (2021): 19.5 TFLOPS FP32, 156 TF32,
  // 312 BF16/FP16 dense, 2,039 GB/s (80GB SXM), 1,555 GB/s (40GB), NVLink 600.
  const Hardware& a80 = find_gpu("a100-80g");
  EXPECT_EQ(a80.peak_flops_bf16, 312e12);
  EXPECT_EQ(a80.peak_flops_fp16, 312e12);
  EXPECT_EQ(a80.peak_flops_tf32, 156e12);
  EXPECT_EQ(a80.peak_flops_fp32, 19.5e12);
  EXPECT_EQ(a80.hbm_bandwidth, 2039e9);
  EXPECT_EQ(a80.interconnect_bandwidth, 600e9);
  EXPECT_EQ(a80.device_memory_bytes, 80 * kGiB);
  const Hardware& a40 = find_gpu("a100-40g");
  EXPECT_EQ(a40.device_memory_bytes, 42949672960u);  // 40 GiB
  EXPECT_EQ(a40.hbm_bandwidth, 1555e9);
}

TEST(Profiles, HopperDatasheets) {
  // NVIDIA H100 / H200 datasheets: 1,979 TFLOPS BF16 "with sparsity" -> 989.5
  // dense; 67 FP32; 3.35 TB/s (H100 SXM), 4.8 TB/s and 141 GB (H200).
  const Hardware& h100 = find_gpu("h100-80g");
  EXPECT_EQ(h100.peak_flops_bf16, 989.5e12);
  EXPECT_EQ(h100.peak_flops_tf32, 494.5e12);
  EXPECT_EQ(h100.peak_flops_fp32, 67e12);
  EXPECT_EQ(h100.hbm_bandwidth, 3.35e12);
  EXPECT_EQ(h100.interconnect_bandwidth, 900e9);
  const Hardware& h200 = find_gpu("h200");
  EXPECT_EQ(h200.peak_flops_bf16, h100.peak_flops_bf16);
  EXPECT_EQ(h200.hbm_bandwidth, 4.8e12);
  EXPECT_EQ(h200.device_memory_bytes, 141 * kGiB);
}

TEST(Profiles, NoBf16OrTf32OnVoltaAndTuring) {
  // V100 datasheet: 125 TFLOPS tensor (FP16), 15.7 FP32; T4 datasheet: 65
  // TFLOPS mixed precision, 8.1 FP32. Neither has TF32 or BF16 tensor cores.
  for (const char* name : {"v100-16g", "v100-32g", "t4"}) {
    const Hardware& hw = find_gpu(name);
    EXPECT_EQ(hw.peak_flops_bf16, 0) << name;
    EXPECT_EQ(hw.peak_flops_tf32, 0) << name;
  }
  EXPECT_EQ(find_gpu("v100-32g").peak_flops_fp16, 125e12);
  EXPECT_EQ(find_gpu("t4").peak_flops_fp16, 65e12);
  EXPECT_EQ(find_gpu("t4").peak_flops_fp32, 8.1e12);
}

TEST(Profiles, GeForceUsesFp32AccumulateRates) {
  // GA102 whitepaper: RTX 3090 71 TFLOPS FP16/BF16 tensor with FP32 accumulate;
  // Ada whitepaper: RTX 4090 165.2 TFLOPS; both 24 GB.
  EXPECT_EQ(find_gpu("rtx3090").peak_flops_bf16, 71e12);
  EXPECT_EQ(find_gpu("rtx3090").hbm_bandwidth, 936e9);
  EXPECT_EQ(find_gpu("rtx4090").peak_flops_fp16, 165.2e12);
  EXPECT_EQ(find_gpu("rtx4090").hbm_bandwidth, 1008e9);
  EXPECT_EQ(find_gpu("rtx4090").device_memory_bytes, 24 * kGiB);
}

TEST(Profiles, CpuAdamDerivedFromZeroOffload) {
  // ZeRO-Offload (Ren et al., ATC 2021), Table 4: 10 B params in 2.57 s on the
  // DGX-2 host, which is the v100-32g profile's host.
  EXPECT_DOUBLE_EQ(find_gpu("v100-32g").cpu_adam_params_per_s, 10e9 / 2.57);
  // Other hosts scale from it; all land between 0.5 and 10 B params/s.
  for (const Hardware& hw : builtin_gpus()) {
    EXPECT_GT(hw.cpu_adam_params_per_s, 0.5e9) << hw.name;
    EXPECT_LT(hw.cpu_adam_params_per_s, 10e9) << hw.name;
  }
}

TEST(Profiles, EveryProfileIsComplete) {
  for (const Hardware& hw : builtin_gpus()) {
    EXPECT_FALSE(hw.description.empty()) << hw.name;
    EXPECT_GT(hw.device_memory_bytes, 0u) << hw.name;
    EXPECT_GT(hw.host_memory_bytes, hw.device_memory_bytes) << hw.name;
    EXPECT_GT(hw.peak_flops_fp32, 0) << hw.name;
    EXPECT_GE(hw.peak_flops_fp16, hw.peak_flops_fp32) << hw.name;
    EXPECT_GT(hw.hbm_bandwidth, hw.h2d_bandwidth) << hw.name;
    EXPECT_GT(hw.nvme_read_bandwidth, 0) << hw.name;
    EXPECT_GT(hw.interconnect_bandwidth, 0) << hw.name;
    EXPECT_GT(hw.compute_efficiency, 0) << hw.name;
    EXPECT_LE(hw.compute_efficiency, 1) << hw.name;
    EXPECT_GT(hw.memory_efficiency, 0) << hw.name;
    EXPECT_LE(hw.memory_efficiency, 1) << hw.name;
    EXPECT_DOUBLE_EQ(hw.launch_latency, 5e-6) << hw.name;
  }
}

TEST(Profiles, NodesFromSystemDatasheets) {
  // GPUs per node: DGX-1 8, DGX-2 16, DGX A100/H100/H200 8 (NVIDIA datasheets);
  // AWS g6.4xlarge and g4dn.4xlarge 1 (AWS instance types); desktops 1 (an
  // assumption, profiles.cc).
  const std::pair<const char*, int> gpus[] = {
      {"v100-16g", 8}, {"v100-32g", 16}, {"a100-40g", 8}, {"a100-80g", 8}, {"h100-80g", 8},
      {"h200", 8},     {"l4", 1},        {"t4", 1},       {"rtx3090", 1},  {"rtx4090", 1}};
  for (const auto& [name, count] : gpus) EXPECT_EQ(find_gpu(name).gpus_per_node, count) << name;
  // Host side of PCIe: DGX A100 four gen4 switch uplinks at 25 GB/s (DGX A100
  // System Architecture white paper); DGX H100 one gen5 path per GPU at 50 GB/s
  // (DGX H100 User Guide); DGX-1 four gen3 switch uplinks at 12 GB/s.
  EXPECT_EQ(find_gpu("a100-80g").host_pcie_bandwidth, 100e9);
  EXPECT_EQ(find_gpu("h100-80g").host_pcie_bandwidth, 400e9);
  EXPECT_EQ(find_gpu("v100-16g").host_pcie_bandwidth, 48e9);
  // Network per GPU, each way: HDR 200 Gb/s (DGX A100), NDR 400 Gb/s (DGX
  // H100), 4x EDR 100 Gb/s for 8 GPUs (DGX-1).
  EXPECT_EQ(find_gpu("a100-40g").network_bandwidth, 25e9);
  EXPECT_EQ(find_gpu("h200").network_bandwidth, 50e9);
  EXPECT_EQ(find_gpu("v100-16g").network_bandwidth, 6.25e9);
  // NCCL src/graph/tuning.cc, hwLat Ring/Simple: NVLink 3.4 us, PCI 5.7 us,
  // network 14 us per step.
  EXPECT_EQ(find_gpu("h100-80g").collective_step_latency, 3.4e-6);
  EXPECT_EQ(find_gpu("l4").collective_step_latency, 5.7e-6);
  for (const Hardware& hw : builtin_gpus()) {
    EXPECT_EQ(hw.network_step_latency, 14e-6) << hw.name;
    // A node's host side carries at least one GPU's copies and at most all of them.
    EXPECT_GE(hw.host_pcie_bandwidth, hw.h2d_bandwidth) << hw.name;
    EXPECT_LE(hw.host_pcie_bandwidth, hw.gpus_per_node * hw.h2d_bandwidth) << hw.name;
    EXPECT_GT(hw.network_bandwidth, 0) << hw.name;
    EXPECT_LT(hw.network_bandwidth, hw.interconnect_bandwidth) << hw.name;
  }
}

TEST(Profiles, FindGpuReturnsTheBuiltin) { EXPECT_EQ(&find_gpu("t4"), &builtin_gpus()[7]); }

TEST(Profiles, UnknownGpuListsKnownNames) {
  try {
    find_gpu("a100");
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "unknown GPU 'a100' (known: v100-16g, v100-32g, a100-40g, a100-80g, h100-80g, "
              "h200, l4, t4, rtx3090, rtx4090)");
  }
  EXPECT_THROW(find_gpu(""), Error);
  EXPECT_THROW(find_gpu("A100-80G"), Error);  // keys are case-sensitive
}

}  // namespace
}  // namespace memwall

namespace memwall {
namespace {

// Device names as the CUDA driver reports them (cuDeviceGetName, which
// nvidia-smi and torch.cuda.get_device_name print), with the memory it
// reports, mapped to the built-in profile `memwall calibrate` compares with.
TEST(BuiltinGpuForDevice, DriverNamesFindTheirProfiles) {
  constexpr uint64_t kGB = uint64_t{1} << 30;
  const std::pair<std::pair<const char*, uint64_t>, const char*> cases[] = {
      {{"NVIDIA H100 80GB HBM3", 80 * kGB}, "h100-80g"},
      {{"NVIDIA H200", 141 * kGB}, "h200"},
      {{"NVIDIA A100-SXM4-80GB", 80 * kGB}, "a100-80g"},
      {{"NVIDIA A100-SXM4-40GB", 40 * kGB}, "a100-40g"},
      {{"NVIDIA A100-PCIE-40GB", 40 * kGB}, "a100-40g"},
      {{"Tesla V100-SXM2-16GB", 16 * kGB}, "v100-16g"},
      {{"Tesla V100-SXM2-32GB", 32 * kGB}, "v100-32g"},
      {{"Tesla T4", 15 * kGB}, "t4"},
      {{"NVIDIA L4", 23 * kGB}, "l4"},
      {{"NVIDIA GeForce RTX 3090", 24 * kGB}, "rtx3090"},
      {{"NVIDIA GeForce RTX 4090", 24 * kGB}, "rtx4090"},
  };
  for (const auto& [device, expected] : cases) {
    const Hardware* hw = builtin_gpu_for_device(device.first, device.second);
    ASSERT_NE(hw, nullptr) << device.first;
    EXPECT_EQ(hw->name, expected) << device.first;
  }
  // Families memwall has no profile of: no guess.
  for (const char* other : {"NVIDIA L40S", "NVIDIA A10G", "NVIDIA GeForce RTX 4080",
                            "AMD Instinct MI300X", "Fake CUDA Device", ""}) {
    EXPECT_EQ(builtin_gpu_for_device(other, 48 * kGB), nullptr) << other;
  }
}

}  // namespace
}  // namespace memwall
