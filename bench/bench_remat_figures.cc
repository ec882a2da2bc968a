// The figures of the rematerialization docs, one benchmark per row (issue
// 46: they were DISABLED_ tests that only printed tables):
//   RematZoo/...     every registered remat planner at an unlimited budget on
//                    shapes where activations dominate (the closing note of
//                    issue 5): peak against keep-all's, simulated overhead;
//   Dtr/...          docs/remat-dtr.md, "Figures" and "Complexity": DTR's four
//                    heuristics at 50/70/90% of the keep-all peak, the lowest
//                    budget each reaches on llama2-70b, and a 20,002-op chain;
//   DtrLookahead/... docs/remat-dtr.md, "Lookahead (memwall)".
// Every row runs once; its time is the planner's (the binary searches for
// the lowest budget run before the timed call, at that budget). Counters:
// `overhead` is the simulated iteration time over keep-all's, `lowest` the
// lowest budget found over the keep-all peak; the label is the planner's
// note, and a planner that declines shows its error.
// Run: build/bench/bench_remat_figures [--benchmark_filter=Dtr/]
#include <benchmark/benchmark.h>

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "../src/remat/dtr.h"
#include "../tests/remat/chain.h"
#include "figures.h"
#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/hw/hardware.h"
#include "memwall/models/zoo.h"
#include "memwall/remat/remat.h"
#include "memwall/sim/simulator.h"
#include "synthetic.h"

namespace memwall {
namespace {

using bench::figures_gpu;
using bench::keep_all;
using bench::once;

constexpr double kGiB = 1u << 30;

// The two shapes of the docs' tables.
const std::pair<const char*, ModelOptions> kShapes[] = {
    {"gpt2-small", {.batch = 4, .seq = 1024}},
    {"resnet50", {.batch = 32, .image = 224}},
};

using PlanFn = std::function<RematResult(const Graph&, uint64_t)>;

// A registered planner, or memwall's lookahead variants (not registered).
PlanFn planner_fn(std::string_view name) {
  if (name == "memwall-lookahead") {
    return [](const Graph& g, uint64_t budget) {
      return plan_dtr_lookahead(g, figures_gpu(), budget, {});
    };
  }
  if (name == "memwall-lookahead-eqclass") {
    return [](const Graph& g, uint64_t budget) {
      return plan_dtr_lookahead_eqclass(g, figures_gpu(), budget, {});
    };
  }
  const RematPlanner* planner = find_remat_planner(name);
  if (planner == nullptr) throw Error(fmt::format("no planner {}", name));
  return [planner](const Graph& g, uint64_t budget) {
    return planner->fn(g, figures_gpu(), budget, {});
  };
}

// The lowest budget `plan` accepts, by `steps` halvings of [0, top].
uint64_t lowest_budget(const PlanFn& plan, const Graph& graph, uint64_t top, int steps) {
  uint64_t lo = 0, hi = top;
  for (int k = 0; k < steps; ++k) {
    const uint64_t mid = lo + (hi - lo) / 2;
    try {
      plan(graph, mid);
      hi = mid;
    } catch (const Error&) {
      lo = mid;
    }
  }
  return hi;
}

// Runs `plan` once under the benchmark's timer; false (and the row shows the
// error) when it declines.
bool timed_plan(benchmark::State& state, const PlanFn& plan, const Graph& graph, uint64_t budget,
                RematResult* result) {
  return bench::timed_plan(
      state, [&] { return plan(graph, budget); }, result);
}

// A planner at a share of the keep-all peak: its simulated overhead.
void at_share(benchmark::State& state, const char* model, ModelOptions options, std::string planner,
              double share) {
  const Graph graph = build_model(model, options);
  const SimResult base = keep_all(graph);
  const auto budget = static_cast<uint64_t>(share * static_cast<double>(device_peak(base)));
  RematResult r;
  if (!timed_plan(state, planner_fn(planner), graph, budget, &r)) return;
  const SimResult sim = simulate(graph, r.plan, figures_gpu());
  state.counters["overhead"] = sim.iteration_time / base.iteration_time;
  state.SetLabel(r.note);
}

// A planner's lowest budget (`steps` halvings), planned again under the timer.
void lowest(benchmark::State& state, const Graph& graph, std::string planner, int steps) {
  const PlanFn plan = planner_fn(planner);
  const uint64_t top = device_peak(keep_all(graph));
  const uint64_t hi = lowest_budget(plan, graph, top, steps);
  RematResult r;
  if (!timed_plan(state, plan, graph, hi, &r)) return;
  state.counters["lowest"] = static_cast<double>(hi) / static_cast<double>(top);
  state.counters["ops"] = static_cast<double>(graph.ops.size());
  state.SetLabel(r.note);
}

// RematZoo: every planner unlimited (search limit 10 s), peak and overhead.
void zoo_unlimited(benchmark::State& state, const char* model, ModelOptions options,
                   std::string planner) {
  const Hardware& hw = figures_gpu();
  const Graph graph = build_model(model, options);
  const SimResult base = keep_all(graph);
  const RematPlanner* p = find_remat_planner(planner);
  RematResult r;
  if (!bench::timed_plan(
          state, [&] { return p->fn(graph, hw, kMaxBytes, {.time_limit = 10}); }, &r)) {
    return;
  }
  const SimResult sim = simulate(graph, r.plan, hw);
  if (!sim.valid) {
    state.SkipWithError(("the simulator rejects the plan: " + sim.reason).c_str());
    return;
  }
  state.counters["peak_gib"] = static_cast<double>(device_peak(sim)) / kGiB;
  state.counters["keep_all_gib"] = static_cast<double>(device_peak(base)) / kGiB;
  state.counters["overhead"] = sim.iteration_time / base.iteration_time;
  state.SetLabel(r.note);
}

void register_figures() {
  constexpr const char* kHeuristics[] = {"dtr", "dtr-eqclass", "dtr-lru", "dtr-largest"};
  constexpr const char* kLookahead[] = {"dtr", "dtr-eqclass", "memwall-lookahead",
                                        "memwall-lookahead-eqclass"};
  for (const auto& [model, options] : kShapes) {
    for (const RematPlanner& planner : remat_planners()) {
      once(benchmark::RegisterBenchmark(fmt::format("RematZoo/{}/{}", model, planner.name).c_str(),
                                        zoo_unlimited, model, options, std::string(planner.name)));
    }
  }
  // docs/remat-dtr.md, "Figures".
  for (const auto& [model, options] : kShapes) {
    for (const double share : {0.5, 0.7, 0.9}) {
      for (const char* name : kHeuristics) {
        once(benchmark::RegisterBenchmark(
            fmt::format("Dtr/{}/{:.0f}%/{}", model, share * 100, name).c_str(), at_share, model,
            options, std::string(name), share));
      }
    }
  }
  // docs/remat-dtr.md, "Complexity": the lowest budget on a large model, and
  // the heuristics' scans at their busiest (20,002 ops, every forward
  // activation evictable).
  for (const char* name : kHeuristics) {
    once(benchmark::RegisterBenchmark(
        fmt::format("Dtr/llama2-70b-b1-s64/lowest/{}", name).c_str(),
        [](benchmark::State& state, std::string planner) {
          lowest(state, build_model("llama2-70b", {.batch = 1, .seq = 64}), planner, 20);
        },
        std::string(name)));
  }
  for (const double share : {0.5, 0.1, 0.02}) {
    for (const char* name : kHeuristics) {
      once(benchmark::RegisterBenchmark(
          fmt::format("Dtr/chain10000/{:.0f}%/{}", share * 100, name).c_str(),
          [](benchmark::State& state, std::string planner, double s) {
            const Graph chain = testing::chain_graph(10000, 1000);
            const uint64_t peak = device_peak(keep_all(chain));
            RematResult r;
            if (!timed_plan(state, planner_fn(planner), chain,
                            static_cast<uint64_t>(s * static_cast<double>(peak)), &r)) {
              return;
            }
            state.counters["ops"] = static_cast<double>(chain.ops.size());
            state.SetLabel(r.note);
          },
          std::string(name), share));
    }
  }
  // docs/remat-dtr.md, "Lookahead (memwall)".
  for (const auto& [model, options] : kShapes) {
    for (const char* name : kLookahead) {
      once(benchmark::RegisterBenchmark(
          fmt::format("DtrLookahead/{}/lowest/{}", model, name).c_str(),
          [](benchmark::State& state, const char* m, ModelOptions o, std::string planner) {
            lowest(state, build_model(m, o), planner, 14);
          },
          model, options, std::string(name)));
    }
    for (const double share : {0.5, 0.6, 0.7, 0.9}) {
      for (const char* name : kLookahead) {
        once(benchmark::RegisterBenchmark(
            fmt::format("DtrLookahead/{}/{:.0f}%/{}", model, share * 100, name).c_str(), at_share,
            model, options, std::string(name), share));
      }
    }
  }
  for (const char* name : kLookahead) {
    once(benchmark::RegisterBenchmark(
        fmt::format("DtrLookahead/synthetic20000/55%/{}", name).c_str(),
        [](benchmark::State& state, std::string planner) {
          const Graph synthetic = bench::synthetic_graph(20000);
          const SimResult base = keep_all(synthetic);
          const auto budget = static_cast<uint64_t>(0.55 * static_cast<double>(device_peak(base)));
          RematResult r;
          if (!timed_plan(state, planner_fn(planner), synthetic, budget, &r)) return;
          const SimResult sim =
              simulate(synthetic, r.plan, figures_gpu(), {.record_curves = false});
          state.counters["ops"] = static_cast<double>(synthetic.ops.size());
          state.counters["overhead"] = sim.iteration_time / base.iteration_time;
          state.SetLabel(r.note);
        },
        std::string(name)));
  }
}

}  // namespace
}  // namespace memwall

int main(int argc, char** argv) {
  return memwall::bench::figures_main(argc, argv, memwall::register_figures);
}
