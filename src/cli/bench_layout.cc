// `memwall bench layout`: every layout algorithm on every lifetimes CSV of
// the data directory and on the zoo models' default schedules, as a table of
// arena / lower bound and of time, or as JSON.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "memwall/base/error.h"
#include "memwall/layout/csv.h"
#include "memwall/layout/from_graph.h"
#include "memwall/layout/problem.h"
#include "memwall/layout/registry.h"
#include "memwall/models/zoo.h"
#include "memwall/report/format.h"
#include "options.h"

namespace memwall::cli {
namespace {

namespace fs = std::filesystem;

struct BenchLayoutArgs {
  std::string data_dir;
  std::vector<std::string> models;  // empty: every zoo model
  std::vector<std::string> algorithms;
  double time_limit = 1.0;
  bool no_models = false;
  bool json = false;
};

struct BenchInput {
  std::string name;
  LayoutProblem problem;
};

std::vector<BenchInput> load_inputs(const BenchLayoutArgs& args, std::string& data_note) {
  std::vector<BenchInput> inputs;
  const std::string dir = find_data_dir(args.data_dir, "layout");
  if (dir.empty()) {
    data_note = "no data directory (../shared/data/layout or --data): zoo models only";
  } else {
    for (const std::string& path : csv_files(dir)) {
      const fs::path file(path);
      BenchInput in{file.stem().string(), read_lifetimes_csv(path, "benchmark").problem};
      in.problem.capacity = capacity_from_csv_name(file.filename().string());
      inputs.push_back(std::move(in));
    }
  }
  if (!args.no_models) {
    std::vector<std::string> names = args.models;
    if (names.empty()) {
      for (const ModelInfo& m : model_zoo()) names.push_back(m.name);
    }
    for (const std::string& name : names) {
      inputs.push_back({name, layout_problem(build_model(name, {}))});
    }
  }
  return inputs;
}

std::string ratio_cell(const LayoutRun& run) {
  if (!run.layout) return run.infeasible ? "infeasible" : "-";
  return fmt::format("{:.4f}{}", run.ratio(), run.fits() ? "" : "*");
}

int run_bench_layout(const BenchLayoutArgs& args) {
  if (!(args.time_limit > 0) || args.time_limit > 3600) {
    fail("--time-limit must be a number of seconds in (0, 3600] (got {})", args.time_limit);
  }
  std::vector<std::string> algorithms = args.algorithms;
  if (algorithms.empty()) algorithms = layout_algorithm_names();
  std::string data_note;
  const std::vector<BenchInput> inputs = load_inputs(args, data_note);
  if (!data_note.empty()) std::cerr << "memwall: note: " << data_note << "\n";

  std::vector<std::vector<LayoutRun>> runs(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (const std::string& algorithm : algorithms) {
      runs[i].push_back(run_layout(inputs[i].problem, algorithm, args.time_limit));
    }
  }

  if (args.json) {
    nlohmann::json out = {{"time_limit_s", args.time_limit}, {"inputs", nlohmann::json::array()}};
    for (size_t i = 0; i < inputs.size(); ++i) {
      const LayoutProblem& p = inputs[i].problem;
      nlohmann::json in = {{"name", inputs[i].name},
                           {"buffers", p.buffers.size()},
                           {"live_lower_bound", live_lower_bound(p)},
                           {"results", nlohmann::json::array()}};
      in["capacity"] = p.capacity > 0 ? nlohmann::json(p.capacity) : nlohmann::json(nullptr);
      for (const LayoutRun& run : runs[i]) {
        nlohmann::json r = {{"algorithm", run.algorithm},
                            {"lower_bound", run.lower_bound},
                            {"optimal", run.optimal},
                            {"fits", run.fits()},
                            {"seconds", run.seconds}};
        r["arena"] = run.layout ? nlohmann::json(run.layout->arena) : nlohmann::json(nullptr);
        r["ratio"] = run.layout ? nlohmann::json(run.ratio()) : nlohmann::json(nullptr);
        if (run.algorithm == "default") r["found_by"] = run.found_by;
        in["results"].push_back(r);
      }
      out["inputs"].push_back(in);
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }

  // Ratios are against the live lower bound, the same for every column.
  size_t width = 5;
  for (const BenchInput& in : inputs) width = std::max(width, in.name.size());
  const auto header = [&](std::string_view title) {
    std::cout << title << "\n" << fmt::format("{:<{}}  {:>7}", "input", width, "buffers");
    for (const std::string& a : algorithms) std::cout << fmt::format("  {:>{}}", a, a.size());
    std::cout << "\n";
  };
  header("arena / live lower bound (* exceeds the capacity; - none found in time)");
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::cout << fmt::format("{:<{}}  {:>7}", inputs[i].name, width,
                             inputs[i].problem.buffers.size());
    const uint64_t live = live_lower_bound(inputs[i].problem);
    for (size_t a = 0; a < algorithms.size(); ++a) {
      const LayoutRun& run = runs[i][a];
      const std::string cell =
          run.layout
              ? fmt::format("{:.4f}{}",
                            static_cast<double>(run.layout->arena) / static_cast<double>(live),
                            run.fits() ? "" : "*")
              : ratio_cell(run);
      std::cout << fmt::format("  {:>{}}", cell, std::max<size_t>(algorithms[a].size(), 7));
    }
    std::cout << "\n";
  }
  std::cout << "\n";
  header("time");
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::cout << fmt::format("{:<{}}  {:>7}", inputs[i].name, width,
                             inputs[i].problem.buffers.size());
    for (size_t a = 0; a < algorithms.size(); ++a) {
      std::cout << fmt::format("  {:>{}}", human_seconds(runs[i][a].seconds),
                               std::max<size_t>(algorithms[a].size(), 7));
    }
    std::cout << "\n";
  }
  return 0;
}

}  // namespace

void add_bench_layout(CLI::App& bench, Action& action) {
  auto* cmd = bench.add_subcommand(
      "layout", "every layout algorithm on ../shared/data/layout and the zoo models");
  auto args = std::make_shared<BenchLayoutArgs>();
  cmd->add_option("--data", args->data_dir,
                  "directory of lifetimes CSVs (default: $MEMWALL_DATA/layout or "
                  "../shared/data/layout)");
  cmd->add_option("--models", args->models, "zoo models to lay out (default: all)")->delimiter(',');
  cmd->add_flag("--no-models", args->no_models, "only the CSV inputs");
  cmd->add_option("--algos", args->algorithms, "algorithms to run (default: all)")->delimiter(',');
  cmd->add_option("--time-limit", args->time_limit, "seconds per run for default and exact")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([&action, args] { action = [args] { return run_bench_layout(*args); }; });
}

}  // namespace memwall::cli
