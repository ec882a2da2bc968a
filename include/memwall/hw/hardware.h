// Hardware profiles and the cost model (DESIGN.md, "Hardware profile and cost
// model"; efficiency factors documented in docs/cost-model.md).
#pragma once

#include <cstdint>
#include <map>
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

  // The node: the GPUs that share one host. Host memory, NVMe and the CPU
  // above are the node's, shared by its ranks (see rank_share).
  int gpus_per_node = 1;
  // Host<->device bytes/s each way that the node's host side (the CPUs'
  // PCIe root ports, behind any PCIe switches) sustains for all its GPUs at
  // once; a rank gets at most h2d_bandwidth of it.
  double host_pcie_bandwidth = 0;
  // Per-GPU bytes/s each way between nodes (the GPU's share of the node's
  // network adapters; InfiniBand and Ethernet rates are per direction).
  double network_bandwidth = 0;
  // Seconds per step of a ring collective between GPUs of one node, and per
  // step that crosses nodes (Note [Collective time] in ranks.cc).
  double collective_step_latency = 0;
  double network_step_latency = 0;

  // Efficiency factors (fraction of peak that real kernels reach).
  double compute_efficiency = 0;
  double memory_efficiency = 0;
  double launch_latency = 0;  // seconds per kernel

  // Note [Fitted efficiencies] (docs/cost-model.md, "Fitted to published
  // runs"): matmuls and attention kernels reach their own fractions of the
  // peak. A matmul's is matmul_efficiency * d / (d + matmul_half_dim), d
  // the GEMM's effective dimension 1 / (1/m + 1/n + 1/k) read from its
  // arithmetic intensity (Hockney's n-half: the size at which half the
  // asymptotic rate is reached). 0 (the default, and optional in JSON):
  // compute_efficiency, with no size effect.
  double matmul_efficiency = 0;
  double matmul_half_dim = 0;
  // Of the FLOPs the graph counts for attention, which are torch's count
  // (the whole s x s score matrix, as torch.utils.flop_counter has it): a
  // causal kernel skips the masked half, so up to kMaxAttentionEfficiency.
  double attention_efficiency = 0;

  // The device's kernels run on the host's own cores (memwall's emulated
  // device, `memwall calibrate` without a GPU): host compute (CPU optimizer
  // steps) then competes with them and does not overlap device compute.
  // Optional in JSON ("device_is_host_cpu"), false when absent.
  bool device_is_host_cpu = false;

  // Note [Copy contention] (src/sim/sim_contention.cc): on a device emulated by
  // the host's cores, the copy engine's memcpy threads and the kernels share
  // the cores and the memory bus. While a host<->device copy runs, kernels
  // take `compute` times as long; a copy takes `copy` times as long as
  // alone. 1 and 1 (the default, and every built-in GPU's: DMA engines) keep
  // copies and compute independent. Optional in JSON ("copy_contention":
  // {"compute": x, "copy": y}, each in [1, 100]); `memwall calibrate
  // --graph` measures it.
  struct CopyContention {
    static constexpr double kMaxSlowdown = 100;  // beyond any machine; keeps times finite
    double compute = 1;
    double copy = 1;
    bool operator==(const CopyContention&) const = default;
  };
  CopyContention copy_contention;

  // Note [Op overhead]: on a device emulated by the host's cores, the
  // seconds the executor's thread spends per op outside its kernel (its
  // bookkeeping: arguments, allocations, frees), which the simulator adds to
  // each device op there. `memwall calibrate --graph` measures it (a
  // keep-all step's time outside its kernels and waits, per op). Optional in JSON
  // ("op_overhead", seconds, at most 1), 0 when absent.
  double op_overhead = 0;

  // Note [Measured kernels]: seconds per kernel that `memwall calibrate
  // --graph` measured on this machine, by kernel signature (graph/calls.h).
  // apply_kernel_times gives them to a graph's ops; ops without one keep
  // the roofline. Empty in built-in profiles. "kernels" in JSON.
  std::map<std::string, double> kernel_seconds;
};

// The most attention_efficiency may be (Note [Fitted efficiencies]).
inline constexpr double kMaxAttentionEfficiency = 2.0;

// The largest gpus_per_node a profile or --gpus-per-node may give (no
// machine has more GPUs behind one host; keeps node arithmetic small).
inline constexpr int kMaxGpusPerNode = 1024;

// Every built-in profile, in display order.
const std::vector<Hardware>& builtin_gpus();
// Throws Error for an unknown name (listing the known ones).
const Hardware& find_gpu(std::string_view name);
// The built-in profile of the GPU a driver names (e.g. "NVIDIA H100 80GB
// HBM3", "NVIDIA A100-SXM4-40GB", "NVIDIA GeForce RTX 4090"): the family is
// a word of the name (the profile's name up to '-', "rtx" dropped), and of
// a family's profiles the one whose memory is nearest `device_memory_bytes`.
// Null when no family matches.
const Hardware* builtin_gpu_for_device(std::string_view device_name, uint64_t device_memory_bytes);
// A profile from JSON (the same field names as above); missing fields are
// errors except description. Throws Error with one line naming the field.
Hardware hardware_from_json(const nlohmann::json& json);
// A hardware file holds one profile (an object) or several (an array, as
// `memwall gpus --json` prints): then the only one, or the one named
// `select`. Throws Error with one line naming the file (and, for bad JSON,
// the line and column).
Hardware read_hardware_file(const std::string& path, std::string_view select = {});
nlohmann::json hardware_to_json(const Hardware& hw);

// Whether the GPU has arithmetic for `dtype`: fp16 and bf16 need a
// non-zero rate in the profile (V100 and T4 have no bf16); fp32, fp64 and
// integer math always run (at the fp32 rate).
bool computes_in(const Hardware& hw, DType dtype);
// "fp32, fp16, bf16": the floating-point dtypes the GPU computes in.
std::string float_dtypes_of(const Hardware& hw);

// ---- Several ranks (data parallelism) ---------------------------------------
// The data-parallel ranks a graph is one rank of: its meta.zero.ranks
// (zero_rank_graph writes it), 1 when absent. Throws Error when it is not
// an integer in [1, 2^20].
int graph_ranks(const Graph& graph);
// Ranks that share one node when `ranks` fill nodes of hw.gpus_per_node.
int ranks_per_node(const Hardware& hw, int ranks);
// What one of `ranks` data-parallel ranks gets of its node: 1/k of its host
// memory, NVMe bandwidth and CPU Adam throughput, and of its host PCIe
// (at most h2d/d2h_bandwidth), k = ranks_per_node (Note [Ranks on a node]
// in ranks.cc). The node's profile itself when k = 1. The simulator
// applies it to the node profile it is given; callers pass node profiles.
Hardware rank_share(const Hardware& node, int ranks);

// Peak dense FLOP/s for math in `dtype` (fp32: plain fp32, PyTorch's default
// for matmuls since 1.12; fp64 and integer dtypes: the fp32 rate). Throws
// Error for a dtype the GPU cannot compute in (computes_in): silently
// charging bf16 at the fp32 rate made V100 estimates 5x too slow. See
// docs/cost-model.md.
double peak_flops(const Hardware& hw, DType dtype);

// The first op with FLOPs in a dtype the GPU cannot compute in, or kNoOp.
OpId first_op_not_computable(const Hardware& hw, const Graph& graph);

// The dtype an op computes in: its first floating-point output, else its
// first floating-point input or update, else fp32.
DType op_compute_dtype(const Graph& graph, const Op& op);

// Cost model: max(flops / achievable FLOP/s, bytes / achievable bandwidth)
// + launch latency, unless the op carries a measured time. Achievable FLOP/s
// is the peak times the op's efficiency (op_compute_efficiency). A collective
// (phase comm) takes collective_time of its bytes over its collective_group.
double op_time(const Hardware& hw, const Graph& graph, const Op& op);
// The fraction of the peak the op's FLOPs run at (Note [Fitted efficiencies]).
double op_compute_efficiency(const Hardware& hw, const Graph& graph, const Op& op);
// Whether an op type is a matmul (mm, addmm, bmm, baddbmm, the zoo's
// matmul, ...) or an attention kernel (any type naming attention).
bool is_matmul_type(std::string_view type);
bool is_attention_type(std::string_view type);

// The tensor-parallel ranks a graph is one rank of: its meta.tensor_parallel
// (the zoo writes it: Note [Tensor parallelism in the zoo] in
// src/models/tensor_parallel.cc), 1 when absent. Throws Error when it is
// not an integer in [1, 2^20].
int graph_tensor_parallel(const Graph& graph);
// The GPUs that run a graph's step together, which share nodes' host
// memory and links (Note [Ranks on a node] in ranks.cc): its data-parallel
// times its tensor-parallel ranks (tensor-parallel ranks sit in one node);
// the data-parallel ranks of a context-parallel graph count its
// context-parallel ones (the planner's ZeRO ranks are both: Note [Context
// parallelism in the zoo]).
// Throws Error past 2^20.
int graph_gpus(const Graph& graph);
// The expert-parallel ranks a graph is one rank of: its
// meta.expert_parallel (Note [Expert parallelism in the zoo] in
// src/models/expert_parallel.cc), 1 when absent; Error as above.
int graph_expert_parallel(const Graph& graph);
// Whether a comm op is a collective over the tensor-parallel group (types
// tp_all_reduce, tp_reduce_scatter, tp_all_gather).
bool is_tensor_parallel_collective(const Op& op);

// The context-parallel ranks a graph is one rank of: its
// meta.context_parallel (Note [Context parallelism in the zoo] in
// src/models/context_parallel.cc), 1 when absent; Error as above.
int graph_context_parallel(const Graph& graph);

// kSendRecv: one hop of a ring, every rank sending to the next at once.
enum class Collective : uint8_t { kAllReduce, kReduceScatter, kAllGather, kAllToAll, kSendRecv };
// The collective of a comm op, from its type ("all_reduce", "reduce_scatter",
// "all_gather", one of them prefixed "tp_", "ep_all_to_all" or
// "cp_send_recv"); throws Error naming the op for any other.
Collective collective_of(const Op& op);
// The ranks a comm op's collective runs over, and the node as that group
// sees it: tp_ collectives over the tensor-parallel ranks (in one node),
// ep_ ones over the expert-parallel ranks (consecutive data-parallel ranks,
// so gpus_per_node / t of them in a node), cp_ ones over the
// context-parallel ranks (Megatron-LM's order: gpus_per_node / t of them in
// a node), the others over the data-parallel ranks.
struct CollectiveGroup {
  int ranks = 1;
  int gpus_per_node = 1;  // of the group's ranks in one node
};
CollectiveGroup collective_group(const Hardware& hw, const Graph& graph, const Op& op);
// Seconds for a ring collective (or an all-to-all) over `ranks` ranks on
// nodes of hw.gpus_per_node in which each rank sends `bytes` (see Note
// [Collective time] in ranks.cc). Throws Error for ranks < 1.
double collective_time(const Hardware& hw, Collective kind, double bytes, int ranks);
// The same for a group with `group.gpus_per_node` of its ranks in a node.
double collective_time(const Hardware& hw, Collective kind, double bytes,
                       const CollectiveGroup& group);
// Gives every op of `graph` with a call record the profile's measured
// seconds for its kernel signature, when it has them (replacing a time the
// op carried); returns how many ops got one. Note [Measured kernels].
size_t apply_kernel_times(const Hardware& hw, Graph& graph);
// Undoes apply_kernel_times before a graph is written: measured kernels
// belong to the profile, and a graph file carrying them would keep one
// machine's times under any other profile.
void clear_kernel_times(const Hardware& hw, Graph& graph);
// Sum of op_time over the graph (the default schedule's compute time).
double iteration_time(const Hardware& hw, const Graph& graph);
// Host<->device copy time of `bytes` (latency + bytes / bandwidth).
double h2d_time(const Hardware& hw, uint64_t bytes);
double d2h_time(const Hardware& hw, uint64_t bytes);

}  // namespace memwall
