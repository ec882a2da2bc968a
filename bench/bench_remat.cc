// memwall's rematerialization planner on graphs of increasing size (issue 5
// targets: a 1,000-op graph in under 1 s, a 20,000-op graph in under 10 s),
// at the budget halfway between its floor and the keep-all peak, where it
// has to search. Run: build/bench/bench_remat.
#include <benchmark/benchmark.h>

#include <string>

#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/plan/builders.h"
#include "memwall/remat/remat.h"
#include "memwall/sim/simulator.h"
#include "synthetic.h"

namespace memwall {
namespace {

void plan_halfway(benchmark::State& state, const Graph& graph) {
  const Hardware& hw = find_gpu("a100-80g");
  const uint64_t top = simulate(graph, default_plan(graph, hw.name, kMaxBytes), hw).peak_bytes[0];
  const uint64_t floor = remat_floor(graph, hw, {}).bytes;
  const uint64_t budget = floor + (top - floor) / 2;
  double overhead = 0;
  for (auto _ : state) {
    const RematResult r = plan_memwall(graph, hw, budget, {});
    benchmark::DoNotOptimize(r.plan.steps.data());
    overhead = simulate(graph, r.plan, hw).iteration_time;
  }
  const double base = simulate(graph, default_plan(graph, hw.name, kMaxBytes), hw).iteration_time;
  state.counters["ops"] = static_cast<double>(graph.ops.size());
  state.counters["overhead"] = overhead / base;
  state.counters["budget_fraction"] = static_cast<double>(budget) / static_cast<double>(top);
}

void BM_MemwallZoo(benchmark::State& state, const char* model, ModelOptions options) {
  plan_halfway(state, build_model(model, options));
}

void BM_MemwallSynthetic(benchmark::State& state) {
  plan_halfway(state, bench::synthetic_graph(static_cast<int>(state.range(0))));
}

BENCHMARK_CAPTURE(BM_MemwallZoo, bert_base_774_ops, "bert-base",
                  ModelOptions{.batch = 32, .seq = 512})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_MemwallZoo, gpt2_medium_1196_ops, "gpt2-medium",
                  ModelOptions{.batch = 8, .seq = 1024})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_MemwallZoo, mixtral_8589_ops, "mixtral-8x7b",
                  ModelOptions{.batch = 1, .seq = 4096})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK(BM_MemwallSynthetic)->Arg(1000)->Arg(20000)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace memwall

BENCHMARK_MAIN();
