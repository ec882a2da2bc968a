// Hardware profiles and the cost model (DESIGN.md, "Hardware profile and cost
// model"; efficiency factors documented in docs/cost-model.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "memwall/graph/types.h"

namespace memwall {

struct Hardware {
  std::string name;         // key, e.g. "a100-80g"
  std::string description;  // e.g. "NVIDIA A100 80GB SXM4"
  uint64_t device_memory_bytes = 0;

  // Peak dense FLOP/s (tensor cores where the GPU has them).
  double peak_flops_fp32 = 0;  // plain fp32 (no TF32)
  double peak_flops_tf32 = 0;  // 0 when the GPU has no TF32
  double peak_flops_fp16 = 0;
  double peak_flops_bf16 = 0;  // 0 when unsupported
  double hbm_bandwidth = 0;    // bytes/s

  double h2d_bandwidth = 0;  // achievable host->device bytes/s (pinned)
  double d2h_bandwidth = 0;  // achievable device->host bytes/s (pinned)
  double pcie_latency = 0;   // seconds per transfer

  double nvme_read_bandwidth = 0;   // bytes/s
  double nvme_write_bandwidth = 0;  // bytes/s
  uint64_t host_memory_bytes = 0;
  double cpu_adam_params_per_s = 0;  // host Adam throughput (parameters/s)
  // Per-GPU bytes/s for collectives (NVLink or PCIe), as NVIDIA states it:
  // both directions summed (one direction gets half).
  double interconnect_bandwidth = 0;

  // Efficiency factors (fraction of peak that real kernels reach).
  double compute_efficiency = 0;
  double memory_efficiency = 0;
  double launch_latency = 0;  // seconds per kernel
};

// Every built-in profile, in display order.
const std::vector<Hardware>& builtin_gpus();
// Throws Error for an unknown name (listing the known ones).
const Hardware& find_gpu(std::string_view name);
// A profile from JSON (the same field names as above); missing fields are
// errors except description. Throws Error with one line naming the field.
Hardware hardware_from_json(const nlohmann::json& json);
// A hardware file holds one profile (an object) or several (an array, as
// `memwall gpus --json` prints): then the only one, or the one named
// `select`. Throws Error with one line naming the file (and, for bad JSON,
// the line and column).
Hardware read_hardware_file(const std::string& path, std::string_view select = {});
nlohmann::json hardware_to_json(const Hardware& hw);

// Peak dense FLOP/s for math in `dtype` (fp32: plain fp32, PyTorch's default
// for matmuls since 1.12). fp16/bf16 fall back to the fp32 rate when the GPU
// has no such tensor cores (e.g. bf16 on V100/T4 is upcast); fp64 and integer
// dtypes use the fp32 rate. See docs/cost-model.md.
double peak_flops(const Hardware& hw, DType dtype);

// The dtype an op computes in: its first floating-point output, else its
// first floating-point input or update, else fp32.
DType op_compute_dtype(const Graph& graph, const Op& op);

// Cost model: max(flops / achievable FLOP/s, bytes / achievable bandwidth)
// + launch latency, unless the op carries a measured time. A collective
// (phase comm) takes collective_time of its bytes.
double op_time(const Hardware& hw, const Graph& graph, const Op& op);
// Seconds for a collective in which each rank sends `bytes` over the
// interconnect (see Note [Collective time] in cost_model.cc).
double collective_time(const Hardware& hw, double bytes);
// Sum of op_time over the graph (the default schedule's compute time).
double iteration_time(const Hardware& hw, const Graph& graph);
// Host<->device copy time of `bytes` (latency + bytes / bandwidth).
double h2d_time(const Hardware& hw, uint64_t bytes);
double d2h_time(const Hardware& hw, uint64_t bytes);

}  // namespace memwall
