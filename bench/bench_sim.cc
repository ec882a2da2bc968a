// Simulator throughput (issue target: at least 2M plan steps per second; a
// 100k-op graph well under a second). Plans over bench/synthetic.h's chain:
// the default plan (compute and free), and one that swaps every other
// saved activation to the host and back with a one-op prefetch, so that
// copies, the release heap and host accounting are all exercised.
#include <benchmark/benchmark.h>

#include "memwall/hw/hardware.h"
#include "memwall/plan/builders.h"
#include "memwall/sim/simulator.h"
#include "synthetic.h"

namespace memwall {
namespace {

constexpr uint64_t kBudget = uint64_t{1} << 60;

const Graph& graph_of(int ops) {
  static const Graph big = bench::synthetic_graph(1'000'000);
  static const Graph small = bench::synthetic_graph(100'000);
  return ops == 1'000'000 ? big : small;
}

Plan swapping_plan(const Graph& graph) {
  const BufferUses uses(graph);
  std::vector<Eviction> evictions;
  bool take = false;
  for (const Buffer& b : graph.buffers) {
    if (b.kind != BufferKind::kActivation || !(take = !take)) continue;
    if (std::optional<Eviction> gap = largest_gap(uses, b.id)) evictions.push_back(*gap);
  }
  return plan_with_evictions(graph, evictions, "a100-80g", kBudget);
}

void run(benchmark::State& state, const Graph& graph, const Plan& plan) {
  const Hardware& hw = find_gpu("a100-80g");
  for (auto _ : state) {
    const SimResult r = simulate(graph, plan, hw);
    if (!r.valid) state.SkipWithError(r.reason.c_str());
    benchmark::DoNotOptimize(r.iteration_time);
  }
  state.counters["steps"] = static_cast<double>(plan.steps.size());
  state.counters["steps_per_s"] = benchmark::Counter(static_cast<double>(plan.steps.size()),
                                                     benchmark::Counter::kIsIterationInvariantRate);
}

void BM_SimulateDefaultPlan(benchmark::State& state) {
  const Graph& graph = graph_of(static_cast<int>(state.range(0)));
  run(state, graph, default_plan(graph, "a100-80g", kBudget));
}

void BM_SimulateSwappingPlan(benchmark::State& state) {
  const Graph& graph = graph_of(static_cast<int>(state.range(0)));
  run(state, graph, swapping_plan(graph));
}

void BM_BuildDefaultPlan(benchmark::State& state) {
  const Graph& graph = graph_of(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(default_plan(graph, "a100-80g", kBudget));
}

BENCHMARK(BM_SimulateDefaultPlan)->Arg(100'000)->Arg(1'000'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SimulateSwappingPlan)->Arg(100'000)->Arg(1'000'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BuildDefaultPlan)->Arg(1'000'000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace memwall

BENCHMARK_MAIN();
