// `memwall bench remat`: every rematerialization planner at evenly spaced
// budgets from the lowest one memwall's planner reaches (remat_floor) to the keep-all peak,
// each plan re-simulated: overhead (iteration time / keep-all) and solve
// time side by side, the best planner per budget, and how memwall's own
// planner compares with the best baseline.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "memwall/base/error.h"
#include "memwall/remat/remat.h"
#include "memwall/remat/runner.h"
#include "memwall/report/format.h"
#include "options.h"

namespace memwall::cli {
namespace {

struct BenchRematArgs {
  GraphSource source;
  GpuSource gpu;
  std::string points = "10";
  double time_limit = RematOptions{}.time_limit;
  std::vector<std::string> planners;  // empty: every registered planner
  bool json = false;
};

nlohmann::json or_null(bool present, double value) {
  return present ? nlohmann::json(value) : nlohmann::json(nullptr);
}

int run_bench_remat(const BenchRematArgs& args) {
  const int64_t points = parse_count(args.points, "--points");
  if (points < 2 || points > 1000) fail("--points must be in [2, 1000] (got {})", points);
  const RematOptions options{.time_limit = checked_time_limit(args.time_limit)};
  std::vector<const RematPlanner*> planners;
  if (args.planners.empty()) {
    for (const RematPlanner& p : remat_planners()) planners.push_back(&p);
  }
  for (const std::string& name : args.planners) planners.push_back(&remat_planner_named(name));
  const bool has_memwall = std::any_of(planners.begin(), planners.end(), [](const RematPlanner* p) {
    return p->name == kMemwallPlanner;
  });

  const Hardware hw = args.gpu.load();
  const Graph graph = args.source.load(hw);
  const RematSweep sweep = sweep_remat_planners(graph, hw, planners, points, options);
  const SimResult& keep_all = sweep.keep_all;
  const uint64_t peak = sweep.peak;
  const RematFloor& floor = sweep.floor;
  const std::vector<uint64_t>& budgets = sweep.budgets;
  const std::vector<std::vector<RematRun>>& runs = sweep.runs;

  if (args.json) {
    nlohmann::json out = {{"graph", graph.name},
                          {"gpu", hw.name},
                          {"keep_all_iteration_time_s", keep_all.iteration_time},
                          {"keep_all_peak_bytes", peak},
                          {"floor_bytes", floor.bytes},
                          {"floor_why", floor.why},
                          {"time_limit_s", options.time_limit},
                          {"planners", nlohmann::json::array()},
                          {"runs", nlohmann::json::array()},
                          {"budgets", nlohmann::json::array()}};
    for (const RematPlanner* p : planners) out["planners"].push_back(p->name);
    for (size_t b = 0; b < budgets.size(); ++b) {
      for (const RematRun& run : runs[b]) {
        out["runs"].push_back(
            {{"budget", run.budget},
             {"planner", run.planner},
             {"feasible", run.feasible},
             {"overhead", or_null(run.feasible, run.overhead(keep_all))},
             {"iteration_time_s", or_null(run.feasible, run.sim.iteration_time)},
             {"peak_bytes", run.feasible ? nlohmann::json(run.peak()) : nlohmann::json(nullptr)},
             {"solve_seconds", run.wall_seconds},
             {"proven_optimal", run.feasible && run.result.proven_optimal},
             {"gap", run.result.gap},
             {"note", run.feasible ? run.result.note : run.error}});
      }
      const BestRematRun best(runs[b]);
      const std::optional<double> ratio = best.memwall_ratio();
      out["budgets"].push_back(
          {{"budget", budgets[b]},
           {"best", best.overall ? nlohmann::json(best.overall->planner) : nlohmann::json(nullptr)},
           {"best_baseline",
            best.baseline ? nlohmann::json(best.baseline->planner) : nlohmann::json(nullptr)},
           {"memwall_over_best_baseline", or_null(ratio.has_value(), ratio.value_or(0))}});
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }

  std::cout << fmt::format(
      "{} on {}: keep-all {} at a peak of {}; lowest budget memwall reaches {}: {}; none can fit "
      "below {}\n\n",
      graph.name, hw.name, human_seconds(keep_all.iteration_time), human_bytes(peak),
      human_bytes(floor.bytes), floor.why, human_bytes(floor.bound.bytes));
  const auto header = [&](std::string_view title, bool summary) {
    std::cout << title << "\n" << fmt::format("{:>10}  {:>6}", "budget", "%peak");
    for (const RematPlanner* p : planners) {
      std::cout << fmt::format("  {:>{}}", p->name, std::max<size_t>(p->name.size(), 9));
    }
    if (summary) {
      std::cout << fmt::format("  {:<12}", "best");
      if (has_memwall) std::cout << "  memwall/best baseline";
    }
    std::cout << "\n";
  };
  const auto budget_cells = [&](uint64_t budget) {
    return fmt::format("{:>10}  {:>5.1f}%", human_bytes(budget),
                       100 * static_cast<double>(budget) / static_cast<double>(peak));
  };
  int at_or_below = 0, compared = 0;
  header("overhead: iteration time / keep-all (- no plan within the budget)", true);
  for (size_t b = 0; b < budgets.size(); ++b) {
    std::cout << budget_cells(budgets[b]);
    for (size_t p = 0; p < planners.size(); ++p) {
      const RematRun& run = runs[b][p];
      const std::string cell =
          run.feasible ? fmt::format("{:.4f}", run.overhead(keep_all)) : std::string("-");
      std::cout << fmt::format("  {:>{}}", cell, std::max<size_t>(planners[p]->name.size(), 9));
    }
    const BestRematRun best(runs[b]);
    std::cout << fmt::format("  {:<12}", best.overall ? best.overall->planner : "-");
    if (has_memwall) {
      const std::optional<double> ratio = best.memwall_ratio();
      std::string cell = "-";
      if (ratio) {
        cell = fmt::format("{:.4f} ({})", *ratio, best.baseline->planner);
        ++compared;
        at_or_below += *ratio <= 1.0;
      } else if (best.memwall != nullptr) {
        cell = "no baseline fits";
      }
      std::cout << "  " << cell;
    }
    std::cout << "\n";
  }
  std::cout << "\n";
  header(fmt::format("solve time (wall, time limit {} s per call)", options.time_limit), false);
  for (size_t b = 0; b < budgets.size(); ++b) {
    std::cout << budget_cells(budgets[b]);
    for (size_t p = 0; p < planners.size(); ++p) {
      std::cout << fmt::format("  {:>{}}", human_seconds(runs[b][p].wall_seconds),
                               std::max<size_t>(planners[p]->name.size(), 9));
    }
    std::cout << "\n";
  }
  if (has_memwall) {
    std::cout << fmt::format(
        "\nmemwall at or below the best baseline at {} of the {} budgets where both fit\n",
        at_or_below, compared);
  }
  return 0;
}

}  // namespace

void add_bench_remat(CLI::App& bench, Action& action) {
  auto* cmd = bench.add_subcommand(
      "remat",
      "every rematerialization planner from the lowest budget memwall reaches to keep-all");
  auto args = std::make_shared<BenchRematArgs>();
  args->source.add_options(*cmd, "gpt2-small");
  args->gpu.add_options(*cmd, "a100-80g");
  cmd->add_option("--points", args->points, "budgets, evenly spaced, both ends included (>= 2)")
      ->capture_default_str();
  cmd->add_option("--time-limit", args->time_limit, "wall seconds per planner call")
      ->capture_default_str();
  cmd->add_option("--planners", args->planners, "planners to run (default: all)")->delimiter(',');
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([&action, args] { action = [args] { return run_bench_remat(*args); }; });
}

}  // namespace memwall::cli
