// `memwall plan`: a plan for a device budget. The default strategy, `auto`,
// is the automatic planner (plan_auto.cc); `remat` and `remat:NAME` run the
// rematerialization planners alone (this file). The plan is re-simulated
// and every figure printed comes from the simulator. Exit code 0: a plan (written with --out); 1:
// the planner returned a plan the simulator rejects (a planner bug, nothing is written); 2: bad
// input, or no plan within the budget (the message gives the minimum feasible budget).
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "exports.h"
#include "format.h"
#include "memwall/graph/error.h"
#include "memwall/graph/graph.h"
#include "memwall/remat/checkpoints.h"
#include "memwall/remat/remat.h"
#include "options.h"
#include "plan_args.h"
#include "remat_runner.h"

namespace memwall::cli {
namespace {

// The one-line error for a planner that found no plan within the budget:
// the minimum feasible budget, and what holds the peak there.
[[noreturn]] void fail_infeasible(const Graph& graph, const Hardware& hw, const RematRun& run,
                                  const RematOptions& options) {
  RematFloor floor;
  try {
    floor = remat_floor(graph, hw, options);
  } catch (const Error& e) {
    fail("{} (the minimum feasible budget is unknown: {})", run.error, e.what());
  }
  if (run.budget < floor.bytes) {
    fail("no plan within a budget of {}: the minimum feasible budget is {}, where {}",
         exact_bytes(run.budget), exact_bytes(floor.bytes), floor.why);
  }
  // Within reach of memwall's planner, not of this one.
  fail("{}; the minimum feasible budget is {}{}, where {}", run.error, exact_bytes(floor.bytes),
       run.planner == "memwall" ? "" : ", reached by --strategy remat", floor.why);
}

int count_recomputes(const Plan& plan) {
  int n = 0;
  for (const Step& step : plan.steps) n += step.kind == StepKind::kRecompute;
  return n;
}

double total_flops(const Graph& graph) {
  double flops = 0;
  for (const Op& op : graph.ops) flops += op.flops;
  return flops;
}

int run_remat_plan(const PlanArgs& args) {
  if (args.max_batch || !args.max_model.empty()) {
    fail("--max-batch and --max-model search with the automatic planner (--strategy auto)");
  }
  const RematPlanner& planner = remat_strategy(args.strategy);
  const RematOptions options{.time_limit = checked_time_limit(args.time_limit)};
  OutputFiles outputs;
  outputs.declare(args.out);
  args.exports.declare(outputs);
  const Hardware hw = load_node(args);
  const Graph graph = args.source.load(hw);
  const uint64_t budget =
      args.budget.empty() ? hw.device_memory_bytes
                          : parse_bytes(args.budget, "--budget", memory_profile(graph).peak_bytes);
  const SimResult keep_all = keep_all_simulation(graph, hw);
  const RematRun run = run_remat(graph, hw, planner, budget, options, args.exports.sim_options());
  if (run.rejected) {
    std::cerr << fmt::format("memwall: error: internal error: {}\n", run.error);
    return 1;
  }
  if (!run.feasible) fail_infeasible(graph, hw, run, options);

  const Plan& plan = run.result.plan;
  if (!args.out.empty()) outputs.set(args.out, plan_text_for(plan, graph));
  args.exports.write(outputs, graph, plan, hw, run.sim);
  outputs.commit();

  const uint64_t keep_all_peak = device_peak(keep_all);
  const int recomputes = count_recomputes(plan);
  const double extra_flops = recomputed_flops(graph, plan);
  const double flops = total_flops(graph);
  if (args.json) {
    nlohmann::json j = {{"graph", graph.name},
                        {"gpu", hw.name},
                        {"strategy", args.strategy},
                        {"planner", run.planner},
                        {"budget", budget},
                        {"peak_bytes", run.peak()},
                        {"keep_all_peak_bytes", keep_all_peak},
                        {"iteration_time_s", run.sim.iteration_time},
                        {"keep_all_iteration_time_s", keep_all.iteration_time},
                        {"overhead", run.overhead(keep_all)},
                        {"steps", plan.steps.size()},
                        {"recomputed_ops", recomputes},
                        {"recomputed_flops", extra_flops},
                        {"iteration_flops", flops},
                        {"solve_seconds", run.wall_seconds},
                        {"note", run.result.note},
                        {"proven_optimal", run.result.proven_optimal},
                        {"gap", run.result.gap}};
    j["out"] = args.out.empty() ? nlohmann::json(nullptr) : nlohmann::json(args.out);
    j["trace"] = args.exports.trace_file.empty() ? nlohmann::json(nullptr)
                                                 : nlohmann::json(args.exports.trace_file);
    j["svg"] = args.exports.svg_file.empty() ? nlohmann::json(nullptr)
                                             : nlohmann::json(args.exports.svg_file);
    std::cout << j.dump(2) << "\n";
    return 0;
  }

  const auto percent = [](double part, double whole) {
    return whole > 0 ? fmt::format("{:.1f}%", 100 * part / whole) : std::string("-");
  };
  std::cout << fmt::format("{} on {}: remat:{}\n", graph.name, hw.name, run.planner);
  std::cout << field("planner", fmt::format("{}: {}", planner.name, planner.summary));
  std::cout << field("budget", fmt::format("{}, {} of the keep-all peak", exact_bytes(budget),
                                           percent(static_cast<double>(budget),
                                                   static_cast<double>(keep_all_peak))));
  std::cout << field("peak device memory",
                     fmt::format("{} at {} (keep-all {})", exact_bytes(run.peak()),
                                 human_seconds(run.sim.peak_time[0]), human_bytes(keep_all_peak)));
  std::cout << field("iteration time",
                     fmt::format("{} (keep-all {})", human_seconds(run.sim.iteration_time),
                                 human_seconds(keep_all.iteration_time)));
  std::cout << field("overhead", fmt::format("{:.4f}x", run.overhead(keep_all)));
  std::cout << field("recomputed ops", fmt::format("{} ({} steps in all)", grouped(recomputes),
                                                   grouped(plan.steps.size())));
  std::cout << field("extra FLOPs",
                     fmt::format("{} (+{} of the iteration's {})", human_flops(extra_flops),
                                 percent(extra_flops, flops), human_flops(flops)));
  std::cout << field("solve time", human_seconds(run.wall_seconds));
  if (!run.result.note.empty()) std::cout << field("note", run.result.note);
  if (run.result.proven_optimal) {
    std::cout << field("optimal", "proven (for the planner's cost model)");
  } else if (run.result.gap > 0) {
    std::cout << field("optimal", fmt::format("not proven: gap {:.2f}%", 100 * run.result.gap));
  }
  if (!args.out.empty()) std::cout << field("plan written to", args.out);
  std::cout << args.exports.written_rows();
  return 0;
}

int run_plan(const PlanArgs& args) {
  if (args.strategy == "remat" || args.strategy.starts_with("remat:")) {
    return run_remat_plan(args);
  }
  return run_auto_plan(args);
}

}  // namespace

void add_plan(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "plan", "how to train it here: where model states live, what to recompute or swap");
  auto args = std::make_shared<PlanArgs>();
  args->source.add_options(*cmd, "gpt2-small");
  args->gpu.add_options(*cmd, "a100-80g");
  cmd->add_option("--budget", args->budget,
                  "device budget: bytes, 40GiB, or 80% of the GPU's memory (default: the GPU's "
                  "memory less the framework reserve; remat strategies: the GPU's memory)");
  cmd->add_option("--strategy", args->strategy,
                  "auto (memwall's planner), a single technique (vdnn, capuchin, zero-offload, "
                  "zero-infinity), remat (memwall's rematerialization alone) or remat:NAME")
      ->capture_default_str();
  cmd->add_option("--ranks", args->ranks, "data-parallel GPUs sharing model states (ZeRO)");
  cmd->add_option("--gpus-per-node", args->gpus_per_node,
                  "GPUs sharing one host's memory, PCIe, NVMe and CPU (default: the profile's)");
  cmd->add_option("--zero-stage", args->zero_stage, "only this ZeRO stage (0-3; default: search)");
  cmd->add_option("--host-memory", args->host_memory,
                  "host memory for offloading (default: the profile's)");
  cmd->add_option("--nvme", args->nvme, "NVMe capacity for offloading (default: unlimited)");
  cmd->add_flag("--max-batch", args->max_batch,
                "find the largest batch that trains within the budget (--model)");
  cmd->add_option("--max-model", args->max_model,
                  "find the largest zoo model whose name starts with FAMILY that trains here");
  cmd->add_option("--time-limit", args->time_limit, "seconds, for planners that search")
      ->capture_default_str();
  cmd->add_option("--out", args->out, "write the plan (memwall.plan/1 JSON)");
  cmd->add_option("--out-graph", args->out_graph,
                  "write the graph the plan runs (ZeRO and offload rewrite it; default with "
                  "--out: next to the plan, when rewritten)");
  args->exports.add_options(*cmd);
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([&action, args] { action = [args] { return run_plan(*args); }; });
}

}  // namespace memwall::cli
