#include "memwall/importers/fidelity.h"

#include <algorithm>
#include <map>
#include <utility>

namespace memwall::importers {

std::vector<ScratchComparison> compare_scratch(const Graph& graph, const MeasuredStep& step) {
  std::map<std::string, std::vector<uint64_t>> predicted, measured;
  for (const Op& op : graph.ops) predicted[op.type].push_back(op.workspace);
  for (const auto& [type, bytes] : step.op_scratch) measured[type].push_back(bytes);
  std::vector<ScratchComparison> rows;
  for (const auto& [type, run] : measured) {
    const auto it = predicted.find(type);
    const std::vector<uint64_t> none;
    const std::vector<uint64_t>& mine = it == predicted.end() ? none : it->second;
    ScratchComparison row{.type = type, .graph_ops = mine.size(), .run_ops = run.size()};
    for (const uint64_t b : run) row.measured_max = std::max(row.measured_max, b);
    for (const uint64_t b : mine) row.predicted_max = std::max(row.predicted_max, b);
    if (row.measured_max == 0 && row.predicted_max == 0) continue;
    if (row.aligned()) {
      for (size_t i = 0; i < run.size(); ++i) {
        if (mine[i] < run[i]) {
          ++row.under;
          row.worst_under = std::max(row.worst_under, run[i] - mine[i]);
        } else if (mine[i] > run[i]) {
          ++row.over;
          row.worst_over = std::max(row.worst_over, mine[i] - run[i]);
        }
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

FidelityCase compare_fidelity(std::string model, MeasuredStep step) {
  FidelityCase c{.model = std::move(model), .step = std::move(step)};
  const Graph& graph = c.step.graph;
  const MemoryProfile eager = memory_profile(graph, eager_liveness(graph));
  c.predicted = eager.peak_bytes;
  c.predicted_op = eager.peak_op == kNoOp ? "-" : graph.ops[eager.peak_op].name;
  const double measured = static_cast<double>(c.step.measured_peak_bytes);
  const double predicted = static_cast<double>(c.predicted);
  c.ratio = predicted > 0 ? measured / predicted : 0;
  c.on_target = predicted >= measured * (1 - kFidelityMaxBelow) &&
                predicted <= measured * (1 + kFidelityMaxAbove);
  c.scratch = compare_scratch(graph, c.step);
  return c;
}

FidelityCase measure_fidelity(const std::string& model, const TorchTraceRequest& request) {
  return compare_fidelity(model, trace_and_measure(request));
}

}  // namespace memwall::importers
