// `memwall calibrate --graph`: the kernels of a traced graph measured on
// this machine through the executor (Note [Measured kernels] in
// hw/hardware.h, Note [Kernel timing] in src/exec).
#include "calibrate_kernels.h"

#include <algorithm>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "exec_library.h"
#include "memwall/graph/calls.h"
#include "memwall/graph/error.h"
#include "memwall/graph/graph.h"
#include "memwall/remat/remat.h"
#include "run_values.h"
#include "runtime_probes.h"

namespace memwall::cli {

// Note [Op overhead]
// ~~~~~~~~~~~~~~~~~~
// Measured kernels are each op's call (arguments, the dispatcher, the
// kernel). Between the calls the executor's thread does its own work: the
// plan's frees, the call's bookkeeping, arena placements. On a GPU that
// work hides behind the queued kernels; on the emulated device the same
// thread runs both, so a step takes its kernels plus that work. On
// MobileNetV2 b8 (1,665 ops of 30 us on average) keep-all spent 3.6-3.8 ms
// of a 50 ms step outside its kernels, which a prediction from kernels
// alone left out (keep-all measured 1.14x of it); on GPT-2 small b8 s256
// it is 0.09%. calibrate --graph takes the executor's own time of a
// keep-all step (overhead_s: the step less its kernels and waits; the
// median over the iterations of the quietest round), divided by the ops
// timed, as the profile's op_overhead, and the simulator adds it to each
// device op on the emulated device.

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
  // One run: per op its median call time, and the median step time of the
  // iterations after the first.
  struct Timed {
    std::vector<double> kernels;
    double step = 0;
    double overhead = 0;  // the median step's time outside kernels and waits
  };
  const auto timed_run = [&] {
    exec::RunResult result;
    std::string error;
    const exec::Status status =
        run(graph, keep_all.plan, trace->values_dir(), options, result, error);
    if (status != exec::Status::kOk) {
      fail("calibrate: {}: timing its kernels: {}", graph_file, error);
    }
    std::vector<double> steps, overheads;
    for (size_t i = 1; i < result.steps.size(); ++i) {
      steps.push_back(result.steps[i].step_time_s);
      overheads.push_back(result.steps[i].overhead_s);
    }
    return Timed{std::move(result.kernel_seconds), median(steps), median(overheads)};
  };
  // Per op, the lowest of its rounds' medians: a shared machine's slow
  // periods last longer than a round and slow all of its iterations.
  std::vector<double> best;
  const auto keep_lowest = [&best](const std::vector<double>& times) {
    if (best.empty()) best.assign(times.size(), -1.0);
    for (size_t op = 0; op < best.size() && op < times.size(); ++op) {
      const double t = times[op];
      if (t > 0 && (best[op] <= 0 || t < best[op])) best[op] = t;
    }
  };
  // Note [Measuring copy contention]: each round again beside the copy
  // load, right after it, so that the machine's drift between the two is
  // small; copies of 8 MiB, the size of the test models' swapped tensors.
  // The whole step counts, not only the kernels: between kernels the
  // executor's own thread waits for a core too (on this 2-vCPU machine the
  // copies made a vDNN step's time outside kernels 10x keep-all's).
  CopyLoad load(uint64_t{8} << 20);
  double alone_step = 0, loaded_step = 0, alone_rate = 0, loaded_rate = 0;
  double alone_overhead = 0;  // of the quietest round alone
  for (int round = 0; round < rounds; ++round) {
    const Timed alone = timed_run();
    keep_lowest(alone.kernels);
    alone_rate = std::max(alone_rate, load.alone(0.25));
    load.start();
    const Timed loaded = timed_run();
    loaded_rate = std::max(loaded_rate, load.stop());
    if (round == 0 || alone.step < alone_step) {
      alone_step = alone.step;
      alone_overhead = alone.overhead;
    }
    if (round == 0 || loaded.step < loaded_step) loaded_step = loaded.step;
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
  // Contention only slows; a ratio below 1 is the machine's drift.
  if (alone_step > 0) out.contention.compute = std::max(1.0, loaded_step / alone_step);
  if (loaded_rate > 0) out.contention.copy = std::max(1.0, alone_rate / loaded_rate);
  // Note [Op overhead]: what the executor's thread did besides the kernels,
  // spread over the ops it ran them for.
  if (out.ops > 0 && alone_overhead > 0) {
    out.op_overhead = std::min(1.0, alone_overhead / static_cast<double>(out.ops));
  }
  return out;
}

}  // namespace memwall::cli
