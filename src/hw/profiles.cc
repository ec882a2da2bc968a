// Built-in hardware profiles (docs/cost-model.md has the same figures in a
// table, with the reasoning behind each choice).
//
// Conventions used throughout:
// - Device and host memory: NVIDIA's "N GB" is N GiB of physical DRAM (HBM and
//   GDDR dies, like DIMMs, come in power-of-two sizes; e.g. a V100-SXM2-32GB
//   reports 32.00 GiB). We store N * 2^30 and do not subtract what the driver
//   reserves: the planner's budget absorbs that.
// - Bandwidths and FLOP/s are decimal (GB/s = 1e9 B/s), as vendors state them.
// - FLOP/s are dense: NVIDIA's Ampere/Hopper/Ada sheets print tensor figures
//   "with sparsity", which we halve.
// - Every number cites its public source next to it.
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "memwall/base/error.h"
#include "memwall/hw/hardware.h"

namespace memwall {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr double kT = 1e12;  // tera (FLOP/s or B/s)
constexpr double kG = 1e9;   // giga

// ---- Host <-> device copies (pinned memory, one direction) ------------------
// Achievable copies reach ~80% of the PCIe x16 per-direction peak (15.75, 31.5,
// 63 GB/s for gen 3/4/5):
// - gen3: CUDA bandwidthTest on a P100-PCIe, gen3 x16: 12.15 GB/s H2D, 12.89
//   GB/s D2H (github.com/mpicbg-scicomp/gearshifft PR #82); BaM (Qureshi et al.,
//   ASPLOS 2023) authors: V100 ingress ~12 GB/s (github.com/ZaidQureshi/bam #54).
// - gen4: nvbandwidth on an A100-SXM4-40GB: 25.13 GB/s H2D
//   (github.com/NVIDIA/nvbandwidth #42); on RTX 4090s: 24-26 GB/s H2D, 26-27
//   GB/s D2H (nvbandwidth #15); BaM: A100 peak 25 GB/s.
// - gen5: nvbandwidth on H100 SXM: 52.8 GB/s D2H (nvbandwidth #24); 80% of 63.
constexpr double kPcie3 = 12 * kG;
constexpr double kPcie4 = 25 * kG;
constexpr double kPcie5 = 50 * kG;
// Fixed cost of one cudaMemcpyAsync (driver call, DMA setup, PCIe round trip):
// order of magnitude of the small-transfer latencies Li et al. measure in
// "Evaluating Modern GPU Interconnect" (IEEE TPDS 2020). A modelling choice.
constexpr double kPcieLatency = 10e-6;

// ---- Interconnect for collectives (NVIDIA's per-GPU figure, both directions)
// PCIe x16 as NVIDIA's PCIe-card datasheets state it: gen3 32 GB/s (T4 sheet),
// gen4 64 GB/s (L4 sheet; the PCIe 4.0 x16 rate for the GeForce cards too).
constexpr double kPcie3Link = 32 * kG;
constexpr double kPcie4Link = 64 * kG;

// ---- The host side of a node's PCIe (Note [Ranks on a node] in ranks.cc) ---
// Host<->device bytes/s each way that all GPUs of a node get at once: the
// x16 links between the CPUs and the GPUs (or the PCIe switches above them),
// each at the achievable rate above.
// - DGX-1: four PCIe gen3 switches, each with two GPUs and one InfiniBand
//   adapter on a x16 link to a CPU (NVIDIA, "DGX-1 with Tesla V100 System
//   Architecture", WP-08437-002, 2017): 4 x 12 GB/s.
// - DGX-2: the switch tree's uplinks are not published; its two Xeon
//   Platinum 8168 have 48 PCIe 3.0 lanes each (Intel ARK), so at most six x16
//   links' worth reaches the host: 6 x 12 GB/s, an upper bound.
// - DGX A100: four PCIe gen4 switches, each with two GPUs and two ConnectX-6
//   adapters on a x16 link to a CPU (NVIDIA, "DGX A100 System Architecture",
//   WP-10083-001, 2020): 4 x 25 GB/s.
// - DGX H100 and H200: each GPU reaches its CPU through its own ConnectX-7
//   and that adapter's PCIe gen5 switch, four per CPU (NVIDIA DGX H100/H200
//   User Guide, "Network Modules"): 8 x 50 GB/s.
// - One-GPU hosts (the cloud slices and desktops below): the GPU's own link.
constexpr double kDgx1HostPcie = 4 * kPcie3;
constexpr double kDgx2HostPcie = 6 * kPcie3;
constexpr double kDgxA100HostPcie = 4 * kPcie4;
constexpr double kDgxH100HostPcie = 8 * kPcie5;

// ---- Between nodes (per GPU, each way) --------------------------------------
// Datasheets give adapters and their line rate (Gb/s, per direction):
// - DGX-1 (V100): 4x InfiniBand EDR, 100 Gb/s, for 8 GPUs: 6.25 GB/s each
//   (NVIDIA DGX-1 datasheet).
// - DGX-2: 8x 100 Gb/s InfiniBand/100GigE for 16 GPUs: 6.25 GB/s each
//   (NVIDIA DGX-2 datasheet).
// - DGX A100: 8x single-port ConnectX-6 HDR InfiniBand, 200 Gb/s, one per
//   GPU: 25 GB/s (NVIDIA DGX A100 datasheet).
// - DGX H100 and H200: 8x single-port ConnectX-7, 400 Gb/s, one per GPU:
//   50 GB/s (NVIDIA DGX H100 and DGX H200 datasheets).
// - AWS g6.4xlarge and g4dn.4xlarge: "up to 25 Gbps" (AWS EC2 instance type
//   pages): 3.125 GB/s.
// - Desktops: an assumption, no single source: a desktop has no cluster
//   fabric; we take one 10GBASE-T port, the fastest onboard Ethernet of
//   high-end AM4/AM5 boards (e.g. ASUS ProArt X570-Creator WIFI): 1.25 GB/s.
constexpr double kEdrPerGpuOf8 = 4 * 12.5 * kG / 8;
constexpr double kEdrPerGpuOf16 = 8 * 12.5 * kG / 16;
constexpr double kHdr = 25 * kG;
constexpr double kNdr = 50 * kG;
constexpr double kAws25Gbps = 3.125 * kG;
constexpr double kTenGbE = 1.25 * kG;

// ---- GPUs per desktop --------------------------------------------------------
// An assumption: one card. The Ryzen 9 5950X and 7950X give 24 and 28 PCIe
// lanes, 16 of them to graphics (AMD specs); a second card would split them
// x8/x8, and the profiles' 64 GiB host and single drive describe a
// one-card machine.
constexpr int kDesktopGpus = 1;

// ---- Ring collective step latency -------------------------------------------
// NCCL's tuning model (NVIDIA/nccl src/graph/tuning.cc, hwLat, Ring with the
// Simple protocol): 3.4 us per step over NVLink, 5.7 us over PCIe, 14 us per
// step that crosses the network (Note [Collective time] in ranks.cc).
constexpr double kNvlinkStep = 3.4e-6;
constexpr double kPcieStep = 5.7e-6;
constexpr double kNetworkStep = 14e-6;

// ---- NVMe SSDs (sequential read / write, vendor specs) ----------------------
// PCIe 3.0 data-center: Intel SSD DC P4500 4.0 TB, 3.2 / 1.8 GB/s (Lenovo
// ThinkSystem P4500 product guide, Table 2).
constexpr double kNvme3Read = 3.2 * kG, kNvme3Write = 1.8 * kG;
// PCIe 4.0 data-center: Intel SSD D7-P5500 3.84 TB, 7.0 / 4.3 GB/s (Intel
// launch specs, June 2020, reported by AnandTech).
constexpr double kNvme4Read = 7.0 * kG, kNvme4Write = 4.3 * kG;
// Consumer PCIe 4.0: Samsung 980 PRO 1 TB, 7.0 / 5.0 GB/s (Samsung spec, as
// listed by Puget Systems); Samsung 990 PRO 2 TB, 7.45 / 6.9 GB/s (Samsung).
constexpr double kNvme980Read = 7.0 * kG, kNvme980Write = 5.0 * kG;
constexpr double kNvme990Read = 7.45 * kG, kNvme990Write = 6.9 * kG;

// ---- Host Adam throughput ----------------------------------------------------
// Ren et al., "ZeRO-Offload" (USENIX ATC 2021), Table 4: DeepSpeed CPU-Adam
// updates 10 B parameters in 2.57 s (6.4x faster than PyTorch's CPU Adam at
// 1 B) on a DGX-2 host: 2x Xeon Platinum 8168 (48 cores), 12 channels of
// DDR4-2666 (NVIDIA DGX-2 datasheet; Intel ARK).
constexpr double kRefAdamRate = 10e9 / 2.57;  // 3.89e9 params/s
constexpr double kRefCores = 48;
constexpr double dram(double channels, double mega_transfers) {
  return channels * mega_transfers * 1e6 * 8;  // 64-bit channels
}
constexpr double kRefDram = dram(12, 2666.67);  // 256 GB/s
// CPU-Adam streams ~30 bytes per parameter and is vectorised, so it scales
// with cores until DRAM bandwidth caps it: scale the measured rate by the
// smaller of the two ratios to the reference host.
constexpr double cpu_adam(double cores, double dram_bytes_per_s) {
  return kRefAdamRate * std::min(cores / kRefCores, dram_bytes_per_s / kRefDram);
}
// Cloud VM slices: only the vCPU count is published; 2 vCPUs = 1 core.
constexpr double cpu_adam_vm(double vcpus) { return kRefAdamRate * (vcpus / 2) / kRefCores; }

// ---- Efficiency factors (docs/cost-model.md, "Efficiency factors") ----------
// Compute: large GEMMs run at 60-80% of tensor-core peak; Megatron-LM reaches
// 52% end to end (163 of 312 TFLOP/s per A100, Narayanan et al., SC 2021).
// We take the low end so predicted times are not optimistic.
constexpr double kComputeEfficiency = 0.6;
// Memory: Jia et al., "Dissecting the NVIDIA Volta GPU Architecture via
// Microbenchmarking" (2018): 750 of 900 GB/s on V100 (83%), rounded down.
constexpr double kMemoryEfficiency = 0.8;
// Kernel launch: a few microseconds per launch (NVIDIA, "Getting Started with
// CUDA Graphs", 2019); 5 us is the usual roofline-model figure.
constexpr double kLaunchLatency = 5e-6;

// ---- Fitted to published runs (Note [Fitted efficiencies] in cost_model.cc)
// `memwall bench published --fit` fits these to the rows of
// bench/published_runs.json marked fitted and predicts the others with
// them (docs/cost-model.md, "Fitted to published runs"); rounded to three
// digits. The rows:
// - V100: Megatron-LM v1.1.5's README, GPT-2 1.16B, batch 8, one DGX-2
//   V100, 1121 ms per iteration (71.9 TFLOP/s).
// - A100: the same README on a DGX A100 (batch 16, 1076 ms); llm-foundry's
//   benchmark README, MPT-350m (A100 40GB, 55,995 tokens/s per GPU) and
//   MPT-7b (A100 80GB, 4,641 tokens/s per GPU), 8 GPUs, FSDP; Narayanan et
//   al. 2021's Table 1, the 1.7B GPT on 32 A100s (137 TFLOP/s per GPU) and
//   the 1T GPT on 3,072 (163).
// - H100: llm-foundry's MPT-7b on 8 H100s, 10,643 tokens/s per GPU. The
//   H200 takes the H100's fit: the same GH100 compute (989.5 TFLOP/s bf16
//   in both datasheets), more and faster memory.
// The matmul fractions replace compute_efficiency's 0.6 for matmuls: it
// made V100 and A100 steps too slow and H100 steps too fast. The attention
// fraction is of torch's FLOP count, which counts the masked half of a
// causal kernel. The held-out rows' ratios are in docs/cost-model.md.
// Refitted with two of Narayanan et al. 2021's Megatron-LM runs among the
// fitted rows (issue 49: their unfused attention's batched GEMMs of head
// dimension 96-160 are the first fitted GEMMs that small): the half
// dimension fell from 256 to 64 and the attention fraction from its bound
// to the matmul efficiency itself (V100 0.779 -> 0.713, A100 0.693 ->
// 0.670, H100 0.556 -> 0.544); docs/cost-model.md has the fit.
constexpr double kMatmulHalfDim = 64;
constexpr double kV100Matmul = 0.713, kV100Attention = 0.713;
constexpr double kA100Matmul = 0.670, kA100Attention = 0.670;
constexpr double kH100Matmul = 0.544, kH100Attention = 0.544;

std::vector<Hardware> make_builtin_gpus() {
  std::vector<Hardware> gpus;

  // NVIDIA V100 Tensor Core GPU datasheet (2020 update, SXM2): 15.7 TFLOPS
  // FP32, 125 TFLOPS tensor (FP16), 900 GB/s HBM2, NVLink 300 GB/s, 16/32 GB.
  // No TF32 or BF16 tensor cores. Host: NVIDIA DGX-1 datasheet (V100): 2x Xeon
  // E5-2698 v4 (20 cores each), 512 GB DDR4-2133 (4 channels per socket).
  gpus.push_back({
      .name = "v100-16g",
      .description = "NVIDIA Tesla V100 SXM2 16GB (DGX-1 host)",
      .device_memory_bytes = 16 * kGiB,
      .peak_flops_fp32 = 15.7 * kT,
      .peak_flops_tf32 = 0,
      .peak_flops_fp16 = 125 * kT,
      .peak_flops_bf16 = 0,
      .hbm_bandwidth = 900 * kG,
      .h2d_bandwidth = kPcie3,
      .d2h_bandwidth = kPcie3,
      .pcie_latency = kPcieLatency,
      .nvme_read_bandwidth = kNvme3Read,
      .nvme_write_bandwidth = kNvme3Write,
      .host_memory_bytes = 512 * kGiB,
      .cpu_adam_params_per_s = cpu_adam(40, dram(8, 2133.33)),
      .interconnect_bandwidth = 300 * kG,
      .gpus_per_node = 8,  // DGX-1: 8 GPUs (datasheet)
      .host_pcie_bandwidth = kDgx1HostPcie,
      .network_bandwidth = kEdrPerGpuOf8,
      .collective_step_latency = kNvlinkStep,
      .network_step_latency = kNetworkStep,
      .compute_efficiency = kComputeEfficiency,
      .memory_efficiency = kMemoryEfficiency,
      .launch_latency = kLaunchLatency,
      .matmul_efficiency = kV100Matmul,
      .matmul_half_dim = kMatmulHalfDim,
      .attention_efficiency = kV100Attention,
  });

  // Same V100 datasheet, 32 GB. Host: NVIDIA DGX-2 datasheet: 2x Xeon Platinum
  // 8168 (24 cores each), 1.5 TB DDR4 -- the ZeRO-Offload paper's machine.
  gpus.push_back({
      .name = "v100-32g",
      .description = "NVIDIA Tesla V100 SXM 32GB (DGX-2 host)",
      .device_memory_bytes = 32 * kGiB,
      .peak_flops_fp32 = 15.7 * kT,
      .peak_flops_tf32 = 0,
      .peak_flops_fp16 = 125 * kT,
      .peak_flops_bf16 = 0,
      .hbm_bandwidth = 900 * kG,
      .h2d_bandwidth = kPcie3,
      .d2h_bandwidth = kPcie3,
      .pcie_latency = kPcieLatency,
      .nvme_read_bandwidth = kNvme3Read,
      .nvme_write_bandwidth = kNvme3Write,
      .host_memory_bytes = 1536 * kGiB,
      .cpu_adam_params_per_s = cpu_adam(48, kRefDram),
      .interconnect_bandwidth = 300 * kG,
      .gpus_per_node = 16,  // DGX-2: 16 GPUs (datasheet)
      .host_pcie_bandwidth = kDgx2HostPcie,
      .network_bandwidth = kEdrPerGpuOf16,
      .collective_step_latency = kNvlinkStep,
      .network_step_latency = kNetworkStep,
      .compute_efficiency = kComputeEfficiency,
      .memory_efficiency = kMemoryEfficiency,
      .launch_latency = kLaunchLatency,
      .matmul_efficiency = kV100Matmul,
      .matmul_half_dim = kMatmulHalfDim,
      .attention_efficiency = kV100Attention,
  });

  // NVIDIA A100 Tensor Core GPU datasheet (2021): 19.5 TFLOPS FP32, 156 TF32,
  // 312 BF16, 312 FP16 (dense); 1,555 GB/s (40GB SXM), 2,039 GB/s (80GB SXM);
  // NVLink 600 GB/s; PCIe Gen4. Host: NVIDIA DGX A100 datasheet: 2x AMD EPYC
  // 7742 (64 cores each, 8 channels of DDR4-3200), 1 TB (320GB system) or
  // 2 TB (640GB system).
  gpus.push_back({
      .name = "a100-40g",
      .description = "NVIDIA A100 40GB SXM4 (DGX A100 320GB host)",
      .device_memory_bytes = 40 * kGiB,
      .peak_flops_fp32 = 19.5 * kT,
      .peak_flops_tf32 = 156 * kT,
      .peak_flops_fp16 = 312 * kT,
      .peak_flops_bf16 = 312 * kT,
      .hbm_bandwidth = 1555 * kG,
      .h2d_bandwidth = kPcie4,
      .d2h_bandwidth = kPcie4,
      .pcie_latency = kPcieLatency,
      .nvme_read_bandwidth = kNvme4Read,
      .nvme_write_bandwidth = kNvme4Write,
      .host_memory_bytes = 1024 * kGiB,
      .cpu_adam_params_per_s = cpu_adam(128, dram(16, 3200)),
      .interconnect_bandwidth = 600 * kG,
      .gpus_per_node = 8,  // DGX A100: 8 GPUs (datasheet)
      .host_pcie_bandwidth = kDgxA100HostPcie,
      .network_bandwidth = kHdr,
      .collective_step_latency = kNvlinkStep,
      .network_step_latency = kNetworkStep,
      .compute_efficiency = kComputeEfficiency,
      .memory_efficiency = kMemoryEfficiency,
      .launch_latency = kLaunchLatency,
      .matmul_efficiency = kA100Matmul,
      .matmul_half_dim = kMatmulHalfDim,
      .attention_efficiency = kA100Attention,
  });

  gpus.push_back({
      .name = "a100-80g",
      .description = "NVIDIA A100 80GB SXM4 (DGX A100 640GB host)",
      .device_memory_bytes = 80 * kGiB,
      .peak_flops_fp32 = 19.5 * kT,
      .peak_flops_tf32 = 156 * kT,
      .peak_flops_fp16 = 312 * kT,
      .peak_flops_bf16 = 312 * kT,
      .hbm_bandwidth = 2039 * kG,
      .h2d_bandwidth = kPcie4,
      .d2h_bandwidth = kPcie4,
      .pcie_latency = kPcieLatency,
      .nvme_read_bandwidth = kNvme4Read,
      .nvme_write_bandwidth = kNvme4Write,
      .host_memory_bytes = 2048 * kGiB,
      .cpu_adam_params_per_s = cpu_adam(128, dram(16, 3200)),
      .interconnect_bandwidth = 600 * kG,
      .gpus_per_node = 8,  // DGX A100: 8 GPUs (datasheet)
      .host_pcie_bandwidth = kDgxA100HostPcie,
      .network_bandwidth = kHdr,
      .collective_step_latency = kNvlinkStep,
      .network_step_latency = kNetworkStep,
      .compute_efficiency = kComputeEfficiency,
      .memory_efficiency = kMemoryEfficiency,
      .launch_latency = kLaunchLatency,
      .matmul_efficiency = kA100Matmul,
      .matmul_half_dim = kMatmulHalfDim,
      .attention_efficiency = kA100Attention,
  });

  // NVIDIA H100 Tensor Core GPU datasheet (SXM): 67 TFLOPS FP32; 989 TF32,
  // 1,979 BF16/FP16 "with sparsity", halved; 80 GB, 3.35 TB/s; NVLink 900 GB/s;
  // PCIe Gen5. Host: NVIDIA DGX H100 datasheet: 2x Xeon Platinum 8480C
  // (56 cores each, 8 channels of DDR5-4800), 2 TB.
  gpus.push_back({
      .name = "h100-80g",
      .description = "NVIDIA H100 80GB SXM5 (DGX H100 host)",
      .device_memory_bytes = 80 * kGiB,
      .peak_flops_fp32 = 67 * kT,
      .peak_flops_tf32 = 494.5 * kT,
      .peak_flops_fp16 = 989.5 * kT,
      .peak_flops_bf16 = 989.5 * kT,
      .hbm_bandwidth = 3.35 * kT,
      .h2d_bandwidth = kPcie5,
      .d2h_bandwidth = kPcie5,
      .pcie_latency = kPcieLatency,
      .nvme_read_bandwidth = kNvme4Read,
      .nvme_write_bandwidth = kNvme4Write,
      .host_memory_bytes = 2048 * kGiB,
      .cpu_adam_params_per_s = cpu_adam(112, dram(16, 4800)),
      .interconnect_bandwidth = 900 * kG,
      .gpus_per_node = 8,  // DGX H100: 8 GPUs (datasheet)
      .host_pcie_bandwidth = kDgxH100HostPcie,
      .network_bandwidth = kNdr,
      .collective_step_latency = kNvlinkStep,
      .network_step_latency = kNetworkStep,
      .compute_efficiency = kComputeEfficiency,
      .memory_efficiency = kMemoryEfficiency,
      .launch_latency = kLaunchLatency,
      .matmul_efficiency = kH100Matmul,
      .matmul_half_dim = kMatmulHalfDim,
      .attention_efficiency = kH100Attention,
  });

  // NVIDIA H200 Tensor Core GPU datasheet (SXM): same Hopper compute as H100
  // SXM (67 FP32; 989 TF32, 1,979 BF16/FP16 with sparsity, halved); 141 GB
  // HBM3e, 4.8 TB/s; NVLink 900 GB/s; PCIe Gen5. Host: NVIDIA DGX H200
  // datasheet: 2x Xeon Platinum 8480C, 2 TB (as DGX H100).
  gpus.push_back({
      .name = "h200",
      .description = "NVIDIA H200 141GB SXM5 (DGX H200 host)",
      .device_memory_bytes = 141 * kGiB,
      .peak_flops_fp32 = 67 * kT,
      .peak_flops_tf32 = 494.5 * kT,
      .peak_flops_fp16 = 989.5 * kT,
      .peak_flops_bf16 = 989.5 * kT,
      .hbm_bandwidth = 4.8 * kT,
      .h2d_bandwidth = kPcie5,
      .d2h_bandwidth = kPcie5,
      .pcie_latency = kPcieLatency,
      .nvme_read_bandwidth = kNvme4Read,
      .nvme_write_bandwidth = kNvme4Write,
      .host_memory_bytes = 2048 * kGiB,
      .cpu_adam_params_per_s = cpu_adam(112, dram(16, 4800)),
      .interconnect_bandwidth = 900 * kG,
      .gpus_per_node = 8,  // DGX H200: 8 GPUs (datasheet)
      .host_pcie_bandwidth = kDgxH100HostPcie,
      .network_bandwidth = kNdr,
      .collective_step_latency = kNvlinkStep,
      .network_step_latency = kNetworkStep,
      .compute_efficiency = kComputeEfficiency,
      .memory_efficiency = kMemoryEfficiency,
      .launch_latency = kLaunchLatency,
      .matmul_efficiency = kH100Matmul,
      .matmul_half_dim = kMatmulHalfDim,
      .attention_efficiency = kH100Attention,
  });

  // NVIDIA L4 Tensor Core GPU datasheet: 30.3 TFLOPS FP32; 120 TF32, 242
  // BF16/FP16 "with sparsity", halved; 24 GB GDDR6, 300 GB/s; PCIe Gen4 x16
  // 64 GB/s. Host: AWS EC2 g6.4xlarge (1 L4, 16 vCPUs, 64 GiB).
  gpus.push_back({
      .name = "l4",
      .description = "NVIDIA L4 24GB PCIe (AWS g6.4xlarge host)",
      .device_memory_bytes = 24 * kGiB,
      .peak_flops_fp32 = 30.3 * kT,
      .peak_flops_tf32 = 60 * kT,
      .peak_flops_fp16 = 121 * kT,
      .peak_flops_bf16 = 121 * kT,
      .hbm_bandwidth = 300 * kG,
      .h2d_bandwidth = kPcie4,
      .d2h_bandwidth = kPcie4,
      .pcie_latency = kPcieLatency,
      .nvme_read_bandwidth = kNvme4Read,
      .nvme_write_bandwidth = kNvme4Write,
      .host_memory_bytes = 64 * kGiB,
      .cpu_adam_params_per_s = cpu_adam_vm(16),
      .interconnect_bandwidth = kPcie4Link,
      .gpus_per_node = 1,  // g6.4xlarge: 1 L4 (AWS)
      .host_pcie_bandwidth = kPcie4,
      .network_bandwidth = kAws25Gbps,
      .collective_step_latency = kPcieStep,
      .network_step_latency = kNetworkStep,
      .compute_efficiency = kComputeEfficiency,
      .memory_efficiency = kMemoryEfficiency,
      .launch_latency = kLaunchLatency,
  });

  // NVIDIA T4 Tensor Core GPU datasheet: 8.1 TFLOPS FP32, 65 TFLOPS mixed
  // precision (FP16/FP32); 16 GB GDDR6, 320+ GB/s; PCIe Gen3 x16 32 GB/s. No
  // TF32 or BF16. Host: AWS EC2 g4dn.4xlarge (1 T4, 16 vCPUs, 64 GiB).
  gpus.push_back({
      .name = "t4",
      .description = "NVIDIA T4 16GB PCIe (AWS g4dn.4xlarge host)",
      .device_memory_bytes = 16 * kGiB,
      .peak_flops_fp32 = 8.1 * kT,
      .peak_flops_tf32 = 0,
      .peak_flops_fp16 = 65 * kT,
      .peak_flops_bf16 = 0,
      .hbm_bandwidth = 320 * kG,
      .h2d_bandwidth = kPcie3,
      .d2h_bandwidth = kPcie3,
      .pcie_latency = kPcieLatency,
      .nvme_read_bandwidth = kNvme3Read,
      .nvme_write_bandwidth = kNvme3Write,
      .host_memory_bytes = 64 * kGiB,
      .cpu_adam_params_per_s = cpu_adam_vm(16),
      .interconnect_bandwidth = kPcie3Link,
      .gpus_per_node = 1,  // g4dn.4xlarge: 1 T4 (AWS)
      .host_pcie_bandwidth = kPcie3,
      .network_bandwidth = kAws25Gbps,
      .collective_step_latency = kPcieStep,
      .network_step_latency = kNetworkStep,
      .compute_efficiency = kComputeEfficiency,
      .memory_efficiency = kMemoryEfficiency,
      .launch_latency = kLaunchLatency,
  });

  // NVIDIA Ampere GA102 GPU architecture whitepaper, RTX 3090: 35.6 TFLOPS
  // FP32, 35.6 TF32, 71 FP16 and 71 BF16 tensor with FP32 accumulate (dense;
  // GeForce runs FP32 accumulate at half the FP16-accumulate rate, and
  // training accumulates in FP32); 24 GB GDDR6X, 936 GB/s; PCIe Gen4.
  // Host: a desktop with an AMD Ryzen 9 5950X (16 cores, 2 channels of
  // DDR4-3200, AMD spec), 64 GiB, Samsung 980 PRO.
  gpus.push_back({
      .name = "rtx3090",
      .description = "NVIDIA GeForce RTX 3090 24GB (Ryzen 9 5950X desktop)",
      .device_memory_bytes = 24 * kGiB,
      .peak_flops_fp32 = 35.6 * kT,
      .peak_flops_tf32 = 35.6 * kT,
      .peak_flops_fp16 = 71 * kT,
      .peak_flops_bf16 = 71 * kT,
      .hbm_bandwidth = 936 * kG,
      .h2d_bandwidth = kPcie4,
      .d2h_bandwidth = kPcie4,
      .pcie_latency = kPcieLatency,
      .nvme_read_bandwidth = kNvme980Read,
      .nvme_write_bandwidth = kNvme980Write,
      .host_memory_bytes = 64 * kGiB,
      .cpu_adam_params_per_s = cpu_adam(16, dram(2, 3200)),
      .interconnect_bandwidth = kPcie4Link,
      .gpus_per_node = kDesktopGpus,
      .host_pcie_bandwidth = kPcie4,
      .network_bandwidth = kTenGbE,
      .collective_step_latency = kPcieStep,
      .network_step_latency = kNetworkStep,
      .compute_efficiency = kComputeEfficiency,
      .memory_efficiency = kMemoryEfficiency,
      .launch_latency = kLaunchLatency,
  });

  // NVIDIA Ada GPU architecture whitepaper, RTX 4090: 82.6 TFLOPS FP32, 82.6
  // TF32, 165.2 FP16 and 165.2 BF16 tensor with FP32 accumulate (dense);
  // 24 GB GDDR6X, 1,008 GB/s; PCIe Gen4. Host: a desktop with an AMD Ryzen 9
  // 7950X (16 cores, 2 channels of DDR5-5200, AMD spec), 64 GiB, Samsung
  // 990 PRO.
  gpus.push_back({
      .name = "rtx4090",
      .description = "NVIDIA GeForce RTX 4090 24GB (Ryzen 9 7950X desktop)",
      .device_memory_bytes = 24 * kGiB,
      .peak_flops_fp32 = 82.6 * kT,
      .peak_flops_tf32 = 82.6 * kT,
      .peak_flops_fp16 = 165.2 * kT,
      .peak_flops_bf16 = 165.2 * kT,
      .hbm_bandwidth = 1008 * kG,
      .h2d_bandwidth = kPcie4,
      .d2h_bandwidth = kPcie4,
      .pcie_latency = kPcieLatency,
      .nvme_read_bandwidth = kNvme990Read,
      .nvme_write_bandwidth = kNvme990Write,
      .host_memory_bytes = 64 * kGiB,
      .cpu_adam_params_per_s = cpu_adam(16, dram(2, 5200)),
      .interconnect_bandwidth = kPcie4Link,
      .gpus_per_node = kDesktopGpus,
      .host_pcie_bandwidth = kPcie4,
      .network_bandwidth = kTenGbE,
      .collective_step_latency = kPcieStep,
      .network_step_latency = kNetworkStep,
      .compute_efficiency = kComputeEfficiency,
      .memory_efficiency = kMemoryEfficiency,
      .launch_latency = kLaunchLatency,
  });

  return gpus;
}

}  // namespace

const std::vector<Hardware>& builtin_gpus() {
  static const std::vector<Hardware> gpus = make_builtin_gpus();
  return gpus;
}

const Hardware& find_gpu(std::string_view name) {
  const auto& gpus = builtin_gpus();
  for (const Hardware& hw : gpus) {
    if (hw.name == name) return hw;
  }
  std::string known;
  for (const Hardware& hw : gpus) {
    if (!known.empty()) known += ", ";
    known += hw.name;
  }
  fail("unknown GPU '{}' (known: {})", name, known);
}

const Hardware* builtin_gpu_for_device(std::string_view device_name, uint64_t device_memory_bytes) {
  // The name's words, lower case: "NVIDIA A100-SXM4-80GB" -> nvidia a100 sxm4 80gb.
  std::vector<std::string> words(1);
  for (const char c : device_name) {
    if (std::isalnum(static_cast<unsigned char>(c)) != 0) {
      words.back().push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    } else if (!words.back().empty()) {
      words.emplace_back();
    }
  }
  const Hardware* best = nullptr;
  uint64_t best_distance = 0;
  for (const Hardware& hw : builtin_gpus()) {
    std::string family = hw.name.substr(0, hw.name.find('-'));
    if (family.starts_with("rtx")) family = family.substr(3);
    if (std::find(words.begin(), words.end(), family) == words.end()) continue;
    const uint64_t distance = hw.device_memory_bytes > device_memory_bytes
                                  ? hw.device_memory_bytes - device_memory_bytes
                                  : device_memory_bytes - hw.device_memory_bytes;
    if (best == nullptr || distance < best_distance) {
      best = &hw;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace memwall
