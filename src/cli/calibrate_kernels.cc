// `memwall calibrate --graph`: the kernels of a traced graph measured on
// this machine through the executor (Note [Measured kernels] in
// hw/hardware.h, Note [Kernel timing] in src/exec).
#include "calibrate_kernels.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "memwall/exec/library.h"
#include "memwall/graph/calls.h"
#include "memwall/graph/error.h"
#include "memwall/graph/graph.h"
#include "memwall/remat/remat.h"
#include "run_values.h"
#include "memwall/runtime/probes.h"

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
// median over the iterations of the typical round), divided by the ops
// timed, as the profile's op_overhead, and the simulator adds it to each
// device op on the emulated device.

// Note [Measuring copy contention]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The simulator's model (Note [Copy contention] in src/sim): while a copy
// runs, compute does 1/`compute` of its work per second, and a copy takes
// `copy` times its time alone. The load (CopyLoad) copies 1 MiB blocks, the
// size of the test models' swapped activations, each waited for and then
// paused for as long as it took: the engine's worker sleeps between copies
// and is woken for each, as in a swap plan. A first load that copied back
// to back, never sleeping, measured compute 2.29-2.87 and copy 1.00-2.07 on
// one model in four calibrations of one day; with such a profile gpt-mini's
// vDNN ran in 0.46 of its predicted time, and in 0.84 of the prediction
// without contention. In a run the woken worker takes a core at once and
// copies at full speed (Note [Copies that preempt the issuing thread] in
// src/exec/executor.cc), which a worker that never sleeps does not show.
// Per round, with the step alone taking A, beside the load L, and the
// copies busy a share f of L, the model says A = L (1 - f) + L f / compute,
// so compute = f / (A / L - 1 + f); copy is the mean copy's time beside
// the step over its time alone, in the same rhythm. Each is the median of
// the rounds.
namespace {
constexpr uint64_t kContentionCopyBytes = uint64_t{1} << 20;
}  // namespace

double compute_slowdown(double alone_step, double loaded_step, double busy_share) {
  if (alone_step <= 0 || loaded_step <= 0 || busy_share <= 0) return 1;
  const double room = alone_step / loaded_step - 1 + busy_share;  // = f / compute
  const double most = Hardware::CopyContention::kMaxSlowdown;
  if (room * most <= busy_share) return most;
  return std::max(1.0, busy_share / room);
}

Graph read_kernel_graph(const std::string& graph_file) {
  Graph graph = read_graph_file(graph_file);
  if (!graph.meta.contains("calls")) {
    fail(
        "calibrate: {}: graph \"{}\" carries no call records, so its kernels cannot be run: "
        "trace the model with `memwall trace`",
        graph_file, graph.name);
  }
  return graph;
}

KernelMeasure measure_kernels(const std::string& graph_file, const Graph& graph, KeptValues& kept,
                              int iterations, int rounds, const Hardware& hw,
                              const std::string& python) {
  importers::TorchTraceRequest request = importers::request_for(graph);
  request.kernels = "cpu";
  request.python = python;
  const std::unique_ptr<importers::RunTrace> trace = kept.take(request, 1, 0);
  check_same_structure(graph, trace->graph(), graph_file);

  // Keep-all on a device as large as the host: every op computed once per
  // iteration, in the graph's order.
  const uint64_t budget = hw.device_memory_bytes;
  const RematResult keep_all = plan_keep_all(graph, hw, budget, {});
  exec::RunOptions options;
  options.steps = 1 + iterations;  // the first iteration pays for fresh pages
  options.time_kernels = true;
  const exec::RunFunction run = exec::load_executor();
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
    return Timed{std::move(result.kernel_seconds), runtime::median(steps), runtime::median(overheads)};
  };
  // Note [The typical round]
  // ~~~~~~~~~~~~~~~~~~~~~~~~~
  // What a run of the plan will measure is one step on the machine as it
  // is then, so the profile takes the kernels of the typical round: the one
  // whose median step is the rounds' median (the lower of two), each op's
  // median there. This shared machine has slow periods longer than a round;
  // the quickest round is as unlike a run as the slowest. A first version
  // took each op's lowest median over the rounds, which mixed the quick
  // moments of different rounds into a step quicker than any round made
  // (on five models, 0.2-7.4% below the quickest round's kernels and 3-18%
  // below the typical round's) and predicted keep-all runs too fast: of 27
  // runs, 8 were within 15% of that prediction, 12 of the quickest round's,
  // 17 of the typical round's (docs/cost-model.md, "Which round's kernels").
  std::vector<Timed> alone_rounds;
  // Note [Measuring copy contention]: each round again beside the copy
  // load, right after it, so that the machine's drift between the two is
  // small. The whole step counts, not only the kernels: between kernels the
  // executor's own thread waits for a core too.
  runtime::CopyLoad load(kContentionCopyBytes);
  std::vector<double> compute_slowdowns, copy_slowdowns;
  for (int round = 0; round < rounds; ++round) {
    Timed alone = timed_run();
    const runtime::CopyLoadStats quiet = load.alone(0.25);
    load.start();
    const Timed loaded = timed_run();
    const runtime::CopyLoadStats beside = load.stop();
    compute_slowdowns.push_back(compute_slowdown(alone.step, loaded.step, beside.busy_share()));
    if (quiet.mean_copy_s() > 0) {
      copy_slowdowns.push_back(beside.mean_copy_s() / quiet.mean_copy_s());
    }
    alone_rounds.push_back(std::move(alone));
  }
  std::sort(alone_rounds.begin(), alone_rounds.end(),
            [](const Timed& a, const Timed& b) { return a.step < b.step; });
  const Timed& typical = alone_rounds[(alone_rounds.size() - 1) / 2];

  // Ops of one signature are one kernel: the mean of their medians.
  std::map<std::string, std::pair<double, int>> sums;
  KernelMeasure out;
  for (const Op& op : graph.ops) {
    const size_t id = static_cast<size_t>(op.id);
    if (id >= typical.kernels.size() || typical.kernels[id] <= 0) continue;
    auto& [seconds, count] = sums[kernel_signature(op.call)];
    seconds += typical.kernels[id];
    ++count;
    ++out.ops;
    out.seconds += typical.kernels[id];
  }
  for (const auto& [signature, sum] : sums) {
    out.kernels.emplace(signature, sum.first / sum.second);
  }
  // Contention only slows; a ratio below 1 is the machine's drift. The
  // median round, for the same reason.
  const auto slowdown = [](std::vector<double> rounds_measured) {
    return std::clamp(runtime::median(std::move(rounds_measured)), 1.0,
                      Hardware::CopyContention::kMaxSlowdown);
  };
  if (!compute_slowdowns.empty()) out.contention.compute = slowdown(compute_slowdowns);
  if (!copy_slowdowns.empty()) out.contention.copy = slowdown(copy_slowdowns);
  // Note [Op overhead]: what the executor's thread did besides the kernels,
  // spread over the ops it ran them for.
  if (out.ops > 0 && typical.overhead > 0) {
    out.op_overhead = std::min(1.0, typical.overhead / static_cast<double>(out.ops));
  }
  return out;
}

}  // namespace memwall::cli
