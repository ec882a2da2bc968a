// `memwall bench plan`: the automatic planner against every single
// technique on the zoo models at several budgets, each plan re-simulated
// within its budget: auto's iteration time over the best single
// technique's, whether any plan exceeds its budget, and planning time.
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/models/zoo.h"
#include "memwall/planner/planner.h"
#include "memwall/planner/versus_singles.h"
#include "memwall/report/format.h"
#include "options.h"

namespace memwall::cli {
namespace {

struct BenchPlanArgs {
  GpuSource gpu;
  std::vector<std::string> models;  // empty: the whole zoo at default shapes
  std::vector<double> fractions = {1.0, 0.5, 0.25};
  double time_limit = 5;
  bool json = false;
};

struct PlanRow : AutoVersusSingles {
  std::string model;
};

int run_bench_plan(const BenchPlanArgs& args) {
  const Hardware hw = args.gpu.load();
  const double time_limit = checked_time_limit(args.time_limit);
  for (const double f : args.fractions) {
    if (!(f > 0 && f <= 1)) fail("--fractions must be in (0, 1] (got {})", f);
  }
  std::vector<std::string> models = args.models;
  if (models.empty()) {
    for (const ModelInfo& m : model_zoo()) models.push_back(m.name);
  }
  // The zoo's default shapes, in bf16, or fp16 on a GPU without bf16.
  ModelOptions shapes;
  if (!computes_in(hw, DType::kBF16)) {
    shapes.precision = Precision::kFp16;
    note(fmt::format("{} has no bf16 arithmetic: the models train in fp16 mixed precision",
                     hw.name));
  }
  std::vector<PlanRow> rows;
  for (const std::string& model : models) {
    const Graph graph = build_model(model, shapes);
    const uint64_t peak = memory_profile(graph).peak_bytes;
    const uint64_t cap = default_budget(hw);
    for (const double f : args.fractions) {
      const uint64_t budget =
          std::min(cap, static_cast<uint64_t>(f * static_cast<double>(std::min(peak, cap))));
      rows.push_back({compare_with_singles(graph, hw, budget, time_limit), model});
      if (!args.json) {
        const PlanRow& r = rows.back();
        std::cerr << fmt::format("  {} at {}: {}\n", model, human_bytes(budget),
                                 r.auto_fits ? human_seconds(r.auto_time) : "no plan");
      }
    }
  }
  size_t compared = 0, never_worse = 0, better = 0, over_budget = 0, planned = 0;
  double worst_seconds = 0;
  for (const PlanRow& r : rows) {
    planned += r.auto_fits;
    over_budget += !r.within_budget;
    worst_seconds = std::max(worst_seconds, r.seconds);
    if (r.auto_fits && !r.best_single.empty()) {
      ++compared;
      never_worse += r.auto_time <= r.best_single_time;
      better += r.auto_time < r.best_single_time;
    }
  }
  if (args.json) {
    nlohmann::json j = {{"gpu", hw.name}, {"rows", nlohmann::json::array()}};
    for (const PlanRow& r : rows) {
      j["rows"].push_back(
          {{"model", r.model},
           {"budget", r.budget},
           {"auto_fits", r.auto_fits},
           {"auto_time_s", r.auto_fits ? nlohmann::json(r.auto_time) : nlohmann::json(nullptr)},
           {"auto_config", r.auto_config},
           {"best_single", r.best_single},
           {"best_single_time_s",
            r.best_single.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.best_single_time)},
           {"within_budget", r.within_budget},
           {"solve_seconds", r.seconds},
           {"why", r.why}});
    }
    j["summary"] = {{"plans", planned},           {"compared", compared},
                    {"never_worse", never_worse}, {"better", better},
                    {"over_budget", over_budget}, {"slowest_solve_s", worst_seconds}};
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("automatic planner vs the best single technique on {}\n", hw.name);
  std::cout << fmt::format("  {:<14}{:>12}{:>12}  {:<25}{:>8}{:>11}  {}\n", "model", "budget",
                           "auto", "best single", "ratio", "solve", "auto's choice");
  for (const PlanRow& r : rows) {
    const std::string single =
        r.best_single.empty()
            ? "none fits"
            : fmt::format("{} {}", r.best_single, human_seconds(r.best_single_time));
    const std::string ratio = r.auto_fits && !r.best_single.empty()
                                  ? fmt::format("{:.4f}", r.auto_time / r.best_single_time)
                                  : "-";
    std::cout << fmt::format("  {:<14}{:>12}{:>12}  {:<25}{:>8}{:>11}  {}\n", r.model,
                             human_bytes(r.budget), r.auto_fits ? human_seconds(r.auto_time) : "-",
                             single, ratio, human_seconds(r.seconds),
                             r.auto_fits ? r.auto_config : r.why.substr(0, 80));
  }
  std::cout << fmt::format(
      "\nauto planned {} of {}; never slower than the best single technique on {} of {} "
      "compared (faster on {}); plans over budget: {}; slowest planning {}\n",
      planned, rows.size(), never_worse, compared, better, over_budget,
      human_seconds(worst_seconds));
  return over_budget == 0 && never_worse == compared ? 0 : 1;
}

}  // namespace

void add_bench_plan(CLI::App& bench, Action& action) {
  auto* cmd = bench.add_subcommand(
      "plan", "the automatic planner vs each single technique on the zoo at several budgets");
  auto args = std::make_shared<BenchPlanArgs>();
  args->gpu.add_options(*cmd, "rtx4090");
  cmd->add_option("--models", args->models, "zoo models (default: all, default shapes)")
      ->delimiter(',');
  cmd->add_option("--fractions", args->fractions,
                  "budgets as fractions of min(keep-all peak, default budget)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--time-limit", args->time_limit,
                  "wall seconds per automatic plan (its whole search)")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([&action, args] { action = [args] { return run_bench_plan(*args); }; });
}

}  // namespace memwall::cli
