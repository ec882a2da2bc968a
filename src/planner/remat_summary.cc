// What `memwall plan` prints of a rematerialization planner's plan
// (remat_summary.h).
#include "memwall/planner/remat_summary.h"

#include <fmt/format.h>

#include "memwall/base/human.h"
#include "memwall/report/format.h"
#include "memwall/report/plan_figures.h"
#include "memwall/sim/throughput.h"

namespace memwall {
namespace {

// What both forms print.
struct Figures {
  Figures(const Graph& graph, const Hardware& hw, const RematRun& run, const SimResult& keep_all)
      : keep_all_peak(device_peak(keep_all)),
        throughput(plan_throughput(graph, run.sim.iteration_time, hw, 1)),
        facts(plan_facts(graph, run.result.plan)) {
    for (const Op& op : graph.ops) flops += op.flops;
  }
  uint64_t keep_all_peak;
  Throughput throughput;
  PlanFacts facts;
  double flops = 0;
};

}  // namespace

nlohmann::json remat_plan_json(const Graph& graph, const Hardware& hw, std::string_view strategy,
                               const RematRun& run, const SimResult& keep_all, uint64_t budget) {
  const Figures f(graph, hw, run, keep_all);
  nlohmann::json j = {{"graph", graph.name},
                      {"gpu", hw.name},
                      {"strategy", std::string(strategy)},
                      {"planner", run.planner},
                      {"budget", budget},
                      {"peak_bytes", run.peak()},
                      {"keep_all_peak_bytes", f.keep_all_peak},
                      {"iteration_time_s", run.sim.iteration_time},
                      {"keep_all_iteration_time_s", keep_all.iteration_time},
                      {"overhead", run.overhead(keep_all)},
                      {"steps", run.result.plan.steps.size()},
                      {"recomputed_ops", f.facts.recomputed_ops},
                      {"recomputed_flops", f.facts.recomputed_flops},
                      {"iteration_flops", f.flops},
                      {"throughput", throughput_json(f.throughput)},
                      {"time_split_s", time_split_json(run.sim)},
                      {"solve_seconds", run.wall_seconds},
                      {"note", run.result.note},
                      {"proven_optimal", run.result.proven_optimal},
                      {"gap", run.result.gap}};
  return j;
}

std::string remat_plan_text(const Graph& graph, const Hardware& hw, const RematPlanner& planner,
                            const RematRun& run, const SimResult& keep_all, uint64_t budget) {
  const Figures f(graph, hw, run, keep_all);
  std::string out;
  const auto percent = [](double part, double whole) {
    return whole > 0 ? fmt::format("{:.1f}%", 100 * part / whole) : std::string("-");
  };
  out += fmt::format("{} on {}: remat:{}\n", graph.name, hw.name, run.planner);
  out += field("planner", fmt::format("{}: {}", planner.name, planner.summary));
  out += field("budget", fmt::format("{}, {} of the keep-all peak", exact_bytes(budget),
                                     percent(static_cast<double>(budget),
                                             static_cast<double>(f.keep_all_peak))));
  out += field("peak device memory",
               fmt::format("{} at {} (keep-all {})", exact_bytes(run.peak()),
                           human_seconds(run.sim.peak_time[0]), human_bytes(f.keep_all_peak)));
  out +=
      field("iteration time", fmt::format("{} (keep-all {})", human_seconds(run.sim.iteration_time),
                                          human_seconds(keep_all.iteration_time)));
  out += field("overhead", fmt::format("{:.4f}x", run.overhead(keep_all)));
  out += field("throughput", throughput_row(f.throughput, run.sim.iteration_time));
  out += field("time split", time_split_row(run.sim));
  out +=
      field("recomputed ops", fmt::format("{} ({} steps in all)", grouped(f.facts.recomputed_ops),
                                          grouped(run.result.plan.steps.size())));
  out += field("extra FLOPs",
               fmt::format("{} (+{} of the iteration's {})", human_flops(f.facts.recomputed_flops),
                           percent(f.facts.recomputed_flops, f.flops), human_flops(f.flops)));
  out += field("solve time", human_seconds(run.wall_seconds));
  if (!run.result.note.empty()) out += field("note", run.result.note);
  if (run.result.proven_optimal) {
    out += field("optimal", "proven (for the planner's cost model)");
  } else if (run.result.gap > 0) {
    out += field("optimal", fmt::format("not proven: gap {:.2f}%", 100 * run.result.gap));
  }
  return out;
}

}  // namespace memwall
