// A graph's kernels timed by the executor (memwall/exec/kernel_timing.h).
#include "memwall/exec/kernel_timing.h"

#include <optional>
#include <utility>

#include "memwall/exec/library.h"
#include "memwall/runtime/probes.h"

namespace memwall::exec {
namespace {
constexpr uint64_t kContentionCopyBytes = uint64_t{1} << 20;
}  // namespace

KernelTiming time_kernel_rounds(const Graph& graph, const Plan& plan, const std::string& values,
                                int iterations, int rounds, const std::string& device) {
  RunOptions options;
  options.device = device;
  options.steps = 1 + iterations;  // the first iteration pays for fresh pages
  options.time_kernels = true;
  const RunFunction run = load_executor();
  KernelTiming out;
  // One run: per op its median call time, and the median step time of the
  // iterations after the first.
  struct Timed {
    std::vector<double> kernels;
    double step = 0;
    double overhead = 0;  // the median step's time outside kernels and waits
  };
  const auto timed_run = [&]() -> std::optional<Timed> {
    RunResult result;
    out.status = run(graph, plan, values, options, result, out.error);
    if (out.status != Status::kOk) return std::nullopt;
    std::vector<double> steps, overheads;
    for (size_t i = 1; i < result.steps.size(); ++i) {
      steps.push_back(result.steps[i].step_time_s);
      overheads.push_back(result.steps[i].overhead_s);
    }
    return Timed{std::move(result.kernel_seconds), runtime::median(steps),
                 runtime::median(overheads)};
  };
  runtime::CopyLoad load(kContentionCopyBytes);
  for (int round = 0; round < rounds; ++round) {
    std::optional<Timed> alone = timed_run();
    if (!alone) return out;
    const runtime::CopyLoadStats quiet = load.alone(0.25);
    load.start();
    const std::optional<Timed> loaded = timed_run();
    if (!loaded) return out;  // ~CopyLoad ends the load
    const runtime::CopyLoadStats beside = load.stop();
    out.rounds.push_back({.kernel_seconds = std::move(alone->kernels),
                          .step_s = alone->step,
                          .overhead_s = alone->overhead,
                          .loaded_step_s = loaded->step,
                          .load_busy_share = beside.busy_share(),
                          .copy_alone_s = quiet.mean_copy_s(),
                          .copy_beside_s = beside.mean_copy_s()});
  }
  return out;
}

}  // namespace memwall::exec
