// The cost model (docs/cost-model.md): a roofline per op plus a fixed launch
// cost, and latency + size / bandwidth per host<->device copy. Collectives
// and several ranks: ranks.cc.
#include <algorithm>
#include <optional>

#include "memwall/base/error.h"
#include "memwall/graph/calls.h"
#include "memwall/hw/hardware.h"

namespace memwall {
namespace {

bool is_floating(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16 ||
         dtype == DType::kF64;
}

const Buffer& buffer_of(const Graph& graph, const Op& op, BufferId id) {
  if (id < 0 || static_cast<size_t>(id) >= graph.buffers.size()) {
    fail("op '{}' references unknown buffer {}", op.name, id);
  }
  return graph.buffers[static_cast<size_t>(id)];
}

}  // namespace

bool computes_in(const Hardware& hw, DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return hw.peak_flops_fp16 > 0;
    case DType::kBF16:
      return hw.peak_flops_bf16 > 0;
    default:
      return true;  // the fp32 rate, which every profile has
  }
}

std::string float_dtypes_of(const Hardware& hw) {
  std::string out = "fp32";
  for (const DType d : {DType::kF16, DType::kBF16}) {
    if (computes_in(hw, d)) out += fmt::format(", {}", to_string(d));
  }
  return out;
}

double peak_flops(const Hardware& hw, DType dtype) {
  if (!computes_in(hw, dtype)) {
    fail("{} cannot compute in {} (its profile gives 0 {} FLOP/s; it computes in {})", hw.name,
         to_string(dtype), to_string(dtype), float_dtypes_of(hw));
  }
  switch (dtype) {
    case DType::kF16:
      return hw.peak_flops_fp16;
    case DType::kBF16:
      return hw.peak_flops_bf16;
    default:
      // fp32 is plain fp32 (PyTorch's default since 1.12 disables TF32 for
      // matmuls). fp64 and integer ops have no field of their own; they are
      // rare in training and get the fp32 rate.
      return hw.peak_flops_fp32;
  }
}

DType op_compute_dtype(const Graph& graph, const Op& op) {
  for (BufferId id : op.out) {
    DType dtype = buffer_of(graph, op, id).dtype;
    if (is_floating(dtype)) return dtype;
  }
  for (const auto* ids : {&op.in, &op.updates}) {
    for (BufferId id : *ids) {
      DType dtype = buffer_of(graph, op, id).dtype;
      if (is_floating(dtype)) return dtype;
    }
  }
  return DType::kF32;
}

OpId first_op_not_computable(const Hardware& hw, const Graph& graph) {
  for (const Op& op : graph.ops) {
    if (op.flops > 0 && !op.time && op.phase != Phase::kComm &&
        !computes_in(hw, op_compute_dtype(graph, op))) {
      return op.id;
    }
  }
  return kNoOp;
}

bool is_matmul_type(std::string_view type) {
  return type == "matmul" || type == "mm" || type == "addmm" || type == "bmm" ||
         type == "baddbmm" || type == "linear" || type == "_grouped_mm";
}

bool is_attention_type(std::string_view type) {
  return type.find("attention") != std::string_view::npos;
}

// Note [Fitted efficiencies]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// One compute efficiency for every kernel made memwall 1.2-1.7x too fast
// on published runs (issue 48): a GEMM's rate depends on its shape, and an
// attention kernel's differs from a GEMM's. A matmul of [m, k] x [k, n]
// does 2mnk FLOPs on e(mk + kn + mn) bytes (e bytes per element), so its
// intensity I = flops / bytes gives d = I e / 2 = 1 / (1/m + 1/n + 1/k)
// from what every op carries, zoo or traced: the smallest dimension
// dominates it, as it dominates tile occupancy. Its rate follows Hockney's
// n-half model, r = r_inf d / (d + d_half). The constants per GPU come from
// `memwall bench published --fit` (docs/cost-model.md).
double op_compute_efficiency(const Hardware& hw, const Graph& graph, const Op& op) {
  // Profiles without fitted fractions (custom and calibrated ones) skip the
  // type tests: op_time runs for every op of every simulated plan.
  if (hw.matmul_efficiency <= 0 && hw.attention_efficiency <= 0) return hw.compute_efficiency;
  if (is_matmul_type(op.type) && hw.matmul_efficiency > 0) {
    double e = hw.matmul_efficiency;
    if (hw.matmul_half_dim > 0 && op.bytes > 0) {
      const double element = static_cast<double>(dtype_size(op_compute_dtype(graph, op)));
      const double d = op.flops / op.bytes * element / 2;
      e *= d / (d + hw.matmul_half_dim);
    }
    return e;
  }
  if (is_attention_type(op.type) && hw.attention_efficiency > 0) return hw.attention_efficiency;
  return hw.compute_efficiency;
}

double op_time(const Hardware& hw, const Graph& graph, const Op& op) {
  if (op.time.has_value()) return *op.time;
  if (op.phase == Phase::kComm) {
    // Note [Tensor parallelism in the zoo]: tp_ collectives run over the
    // graph's tensor-parallel ranks, ep_ ones over its expert-parallel
    // ones, the others over its data-parallel ones.
    const CollectiveGroup group = collective_group(hw, graph, op);
    return collective_time(hw, collective_of(op), op.bytes, group);
  }
  double compute = 0;
  if (op.flops > 0) {
    compute = op.flops /
              (peak_flops(hw, op_compute_dtype(graph, op)) * op_compute_efficiency(hw, graph, op));
  }
  double memory = 0;
  if (op.bytes > 0) memory = op.bytes / (hw.hbm_bandwidth * hw.memory_efficiency);
  return std::max(compute, memory) + hw.launch_latency;
}

namespace {

// The op's measured time: its kernel's, or the sum of a fused call's parts
// when every part was measured. A CPU step (memwall::cpu_step) runs its
// parts as ATen ops on the host, which for the emulated device that
// measures kernels is the same CPU (Note [Measured kernels]).
std::optional<double> measured_time(const Hardware& hw, const Op& op) {
  double total = 0;
  for (const std::string& signature : kernel_signatures(op.call)) {
    const auto it = hw.kernel_seconds.find(signature);
    if (it == hw.kernel_seconds.end()) return std::nullopt;
    total += it->second;
  }
  return total;
}

}  // namespace

size_t apply_kernel_times(const Hardware& hw, Graph& graph) {
  if (hw.kernel_seconds.empty()) return 0;
  size_t applied = 0;
  for (Op& op : graph.ops) {
    if (op.call.empty() || op.phase == Phase::kComm) continue;
    if (const std::optional<double> t = measured_time(hw, op)) {
      op.time = *t;
      ++applied;
    }
  }
  return applied;
}

void clear_kernel_times(const Hardware& hw, Graph& graph) {
  if (hw.kernel_seconds.empty()) return;
  for (Op& op : graph.ops) {
    if (op.call.empty() || op.phase == Phase::kComm) continue;
    if (measured_time(hw, op)) op.time.reset();
  }
}

double iteration_time(const Hardware& hw, const Graph& graph) {
  double total = 0;
  for (const Op& op : graph.ops) total += op_time(hw, graph, op);
  return total;
}

double h2d_time(const Hardware& hw, uint64_t bytes) {
  return hw.pcie_latency + static_cast<double>(bytes) / hw.h2d_bandwidth;
}

double d2h_time(const Hardware& hw, uint64_t bytes) {
  return hw.pcie_latency + static_cast<double>(bytes) / hw.d2h_bandwidth;
}

}  // namespace memwall
