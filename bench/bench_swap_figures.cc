// The figures of docs/swap-vdnn.md and docs/swap-capuchin.md, one benchmark
// per row (issue 46: they were a DISABLED_ test that only printed a table):
// every swap planner on the zoo shapes of tests/swap/activations_zoo_test.cc,
// on an A100 80GB, at an unlimited budget and at 0.9, 0.8 and 0.7 of
// keep-all's peak. Counters over keep-all's: `peak` (device peak) and
// `time` (simulated iteration time); `swapped` and `recomputed` evictions;
// `out_MB`, the bytes copied off the device. A planner that declines shows
// its error. Each row runs once; its time is the planner's.
// Run: build/bench/bench_swap_figures [--benchmark_filter=capuchin]
#include <benchmark/benchmark.h>

#include <string>

#include <fmt/format.h>

#include "figures.h"
#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/sim/simulator.h"
#include "memwall/swap/activations.h"

namespace memwall {
namespace {

struct Shape {
  const char* model;
  int64_t batch, size;  // the sequence, or the image side of a CNN
};

void swap_row(benchmark::State& state, Shape s, const SwapPlanner* planner, double fraction) {
  const Hardware& hw = bench::figures_gpu();
  ModelOptions options;
  options.batch = s.batch;
  (find_model(s.model).family == ModelFamily::kCnn ? options.image : options.seq) = s.size;
  const Graph graph = build_model(s.model, options);
  const SimResult keep = bench::keep_all(graph);
  const auto peak = static_cast<double>(keep.peak_bytes[static_cast<int>(Tier::kDevice)]);
  const uint64_t budget = fraction == 0 ? kMaxBytes : static_cast<uint64_t>(fraction * peak);
  SwapResult r;
  if (!bench::timed_plan(
          state, [&] { return planner->fn(graph, hw, budget, {}); }, &r))
    return;
  state.counters["peak"] = static_cast<double>(r.simulated_peak) / peak;
  state.counters["time"] = r.simulated_time / keep.iteration_time;
  state.counters["swapped"] = static_cast<double>(r.swapped);
  state.counters["recomputed"] = static_cast<double>(r.recomputed);
  state.counters["out_MB"] = static_cast<double>(r.bytes_swapped_out) / 1e6;
  state.SetLabel(r.note);
}

void register_figures() {
  for (const Shape s : {Shape{"gpt2-small", 4, 512}, Shape{"bert-base", 4, 512},
                        Shape{"resnet50", 16, 160}, Shape{"vgg16", 32, 224}}) {
    for (const SwapPlanner& planner : swap_planners()) {
      for (const double fraction : {0.0, 0.9, 0.8, 0.7}) {
        const std::string budget = fraction == 0 ? "unlimited" : fmt::format("{}", fraction);
        bench::once(benchmark::RegisterBenchmark(fmt::format("SwapFigures/{}-b{}-{}/{}/{}", s.model,
                                                             s.batch, s.size, planner.name, budget)
                                                     .c_str(),
                                                 swap_row, s, &planner, fraction));
      }
    }
  }
}

}  // namespace
}  // namespace memwall

int main(int argc, char** argv) {
  return memwall::bench::figures_main(argc, argv, memwall::register_figures);
}
