// `memwall simulate`: judges a plan (or the default plan) with the simulator
// and prints its figures; optionally exports a Chrome trace and an SVG plot.
// Exit code 0: the plan is valid; 1: it is invalid (the reason is printed);
// 2: bad input.
#include <iostream>

#include "commands.h"
#include "memwall/base/error.h"
#include "memwall/base/output_files.h"
#include "memwall/exec/nvme_space.h"
#include "memwall/graph/graph.h"
#include "memwall/plan/builders.h"
#include "memwall/plan/plan.h"
#include "memwall/planner/budget.h"
#include "memwall/report/exports.h"
#include "memwall/report/plan_figures.h"
#include "memwall/report/simulation.h"
#include "memwall/sim/simulator.h"
#include "options.h"

namespace memwall::cli {
namespace {

struct SimulateArgs {
  GraphSource source;
  GpuSource gpu;
  std::string plan_file;
  std::string budget;
  std::optional<std::string> gpus_per_node;
  SimExports exports;
  bool json = false;
};

int run_simulate(const SimulateArgs& args) {
  OutputFiles outputs;
  args.exports.declare(outputs);
  Plan plan;
  Hardware hw;
  if (args.plan_file.empty()) {
    hw = args.gpu.load();
  } else {
    plan = read_plan_file(args.plan_file);
    hw = args.gpu.load_for_plan(plan);
  }
  if (args.gpus_per_node) hw.gpus_per_node = parse_gpus_per_node(*args.gpus_per_node);
  const Graph graph = args.source.load(hw);
  if (args.plan_file.empty()) {
    plan = default_plan(graph, hw.name, hw.device_memory_bytes);
  } else {
    try {
      check_plan_graph(plan, graph);
    } catch (const Error& e) {
      fail("{}: {}", args.plan_file, e.what());
    }
  }
  if (!args.budget.empty()) {
    plan.budget = parse_budget(args.budget, hw, [&] { return keep_all_peak(graph, hw); });
  }
  try {
    validate_plan(plan, graph);
  } catch (const Error& e) {
    if (args.plan_file.empty()) throw;
    fail("{}: {}", args.plan_file, e.what());
  }
  const SimResult r = simulate(graph, plan, hw, args.exports.sim_options());
  args.exports.write(outputs, graph, plan, hw, r);
  outputs.commit();

  const SimulationReport report{graph, plan,           hw,
                                r,     args.plan_file, exec::run_nvme_reservation(graph, plan)};
  if (args.json) {
    std::cout << simulation_json(report).dump(2) << "\n";
    return r.valid ? 0 : 1;
  }
  std::cout << simulation_text(report);
  std::cout << args.exports.written_rows();
  return r.valid ? 0 : 1;
}

}  // namespace

void add_simulate(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("simulate", "judge a plan: validity, time, memory per tier");
  auto args = std::make_shared<SimulateArgs>();
  args->source.add_options(*cmd, "gpt2-small");
  args->gpu.add_options(*cmd, "a100-80g");
  args->gpu.gpu_option->description(
      "built-in GPU profile (see `memwall gpus`; default: the plan's hardware, else a100-80g)");
  cmd->add_option("--plan", args->plan_file, "memwall.plan/1 JSON (default: the default plan)");
  cmd->add_option("--gpus-per-node", args->gpus_per_node,
                  "GPUs sharing one host, for a graph of several ranks (default: the profile's)");
  cmd->add_option("--budget", args->budget,
                  fmt::format("device budget: {} (default: the plan's, or the GPU's memory "
                              "for the default plan)",
                              kBudgetForms));
  add_export_options(*cmd, args->exports);
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([&action, args] { action = [args] { return run_simulate(*args); }; });
}

}  // namespace memwall::cli
