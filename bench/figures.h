// What the figures benchmarks share (bench_remat_figures.cc,
// bench_swap_figures.cc: the tables of the remat and swap docs, one
// benchmark per row): a row runs its planner once under the timer against
// keep-all's simulation on an A100 80GB, and a planner that declines shows
// its error in the row.
#pragma once

#include <benchmark/benchmark.h>

#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/plan/builders.h"
#include "memwall/sim/simulator.h"

namespace memwall::bench {

// The GPU of the docs' tables.
inline const Hardware& figures_gpu() { return find_gpu("a100-80g"); }

// Keep-all, every row's baseline: the default plan with no budget.
inline SimResult keep_all(const Graph& graph) {
  return simulate(graph, default_plan(graph, figures_gpu().name, kMaxBytes), figures_gpu());
}

// A row runs once, in milliseconds.
inline benchmark::internal::Benchmark* once(benchmark::internal::Benchmark* b) {
  return b->Iterations(1)->Unit(benchmark::kMillisecond);
}

// `*result = plan()` under the benchmark's timer; false, the row showing the
// error, when the planner declines (memwall::Error).
template <typename Result, typename Plan>
bool timed_plan(benchmark::State& state, const Plan& plan, Result* result) {
  for (auto _ : state) {
    try {
      *result = plan();
    } catch (const Error& e) {
      state.SkipWithError(e.what());
      return false;
    }
  }
  return true;
}

// main() of a figures binary: its rows registered, then Google Benchmark's
// own flags and run.
inline int figures_main(int argc, char** argv, void (*register_figures)()) {
  register_figures();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace memwall::bench
