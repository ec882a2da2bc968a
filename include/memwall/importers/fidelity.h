// `memwall bench fidelity`'s comparison (docs/cost-model.md, "Fidelity"):
// memwall's predicted peak of a plain PyTorch training step (the eager
// lifetimes and kernel scratch of the traced graph) against the peak
// PyTorch's CPU allocator recorded when the same step ran for real
// (trace_and_measure), and the kernel scratch op by op. Here beside
// trace_and_measure because the measurement is importers' record.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "memwall/graph/graph.h"
#include "memwall/importers/torch_trace.h"

namespace memwall::importers {

// The target: within 1% of the measurement, and never more than 0.5% below
// it (an estimate below the truth is the one that ends in out-of-memory).
inline constexpr double kFidelityMaxAbove = 0.01;
inline constexpr double kFidelityMaxBelow = 0.005;

// Kernel scratch of one op type: the graph's ops of the type in order
// against the run's top-level ops of the type in order (the same program,
// so the same sequence when the counts agree; otherwise only the maxima
// are comparable and the instance counts stay 0).
struct ScratchComparison {
  std::string type;
  size_t graph_ops = 0, run_ops = 0;
  uint64_t measured_max = 0, predicted_max = 0;
  size_t under = 0, over = 0;  // instances predicted below / above the measurement
  uint64_t worst_under = 0, worst_over = 0;
  bool aligned() const { return graph_ops == run_ops; }
};

// The measured op types with scratch on either side, by type.
std::vector<ScratchComparison> compare_scratch(const Graph& graph, const MeasuredStep& step);

struct FidelityCase {
  std::string model;
  MeasuredStep step;
  std::vector<ScratchComparison> scratch;
  uint64_t predicted = 0;    // the eager memory profile's peak
  std::string predicted_op;  // the op at that peak, "-" for none
  double ratio = 0;          // measured / predicted
  bool on_target = false;
};

// `step` against the prediction from its own graph.
FidelityCase compare_fidelity(std::string model, MeasuredStep step);

// trace_and_measure(request), then compare_fidelity; throws what it throws.
FidelityCase measure_fidelity(const std::string& model, const TorchTraceRequest& request);

}  // namespace memwall::importers
