// `memwall calibrate --graph`: the kernels of a traced graph measured on
// this machine through the executor (Note [Measured kernels] in
// hw/hardware.h, Note [Kernel timing] in src/exec).
#include "calibrate_kernels.h"

#include <map>

#include <fmt/format.h>

#include "exec_library.h"
#include "memwall/graph/calls.h"
#include "memwall/graph/error.h"
#include "memwall/graph/graph.h"
#include "memwall/remat/remat.h"
#include "run_values.h"

namespace memwall::cli {

KernelMeasure measure_kernels(const std::string& graph_file, const std::string& keep,
                              int iterations, int rounds, const Hardware& hw,
                              const std::string& python) {
  const Graph graph = read_graph_file(graph_file);
  if (!graph.meta.contains("calls")) {
    fail(
        "calibrate: {}: graph \"{}\" carries no call records, so its kernels cannot be run: "
        "trace the model with `memwall trace`",
        graph_file, graph.name);
  }
  importers::TorchTraceRequest request = importers::request_for(graph);
  request.kernels = "cpu";
  request.python = python;
  const std::unique_ptr<importers::RunTrace> trace = run_values(request, keep, 1, 0);
  check_same_structure(graph, trace->graph(), graph_file);

  // Keep-all on a device as large as the host: every op computed once per
  // iteration, in the graph's order.
  const uint64_t budget = hw.device_memory_bytes;
  const RematResult keep_all = plan_keep_all(graph, hw, budget, {});
  exec::RunOptions options;
  options.steps = 1 + iterations;  // the first iteration pays for fresh pages
  options.time_kernels = true;
  const exec::RunFunction run = load_executor();
  // Per op, the lowest of its rounds' medians: a shared machine's slow
  // periods last longer than a round and slow all of its iterations.
  std::vector<double> best;
  for (int round = 0; round < rounds; ++round) {
    exec::RunResult result;
    std::string error;
    const exec::Status status =
        run(graph, keep_all.plan, trace->values_dir(), options, result, error);
    if (status != exec::Status::kOk) {
      fail("calibrate: {}: timing its kernels: {}", graph_file, error);
    }
    if (best.empty()) best.assign(result.kernel_seconds.size(), -1.0);
    for (size_t op = 0; op < best.size() && op < result.kernel_seconds.size(); ++op) {
      const double t = result.kernel_seconds[op];
      if (t > 0 && (best[op] <= 0 || t < best[op])) best[op] = t;
    }
  }

  // Ops of one signature are one kernel: the mean of their medians.
  std::map<std::string, std::pair<double, int>> sums;
  KernelMeasure out;
  for (const Op& op : graph.ops) {
    const size_t id = static_cast<size_t>(op.id);
    if (id >= best.size() || best[id] <= 0) continue;
    auto& [seconds, count] = sums[kernel_signature(op.call)];
    seconds += best[id];
    ++count;
    ++out.ops;
    out.seconds += best[id];
  }
  for (const auto& [signature, sum] : sums) {
    out.kernels.emplace(signature, sum.first / sum.second);
  }
  return out;
}

}  // namespace memwall::cli
