// `memwall run`: executes a plan on real tensors (the executor, src/exec)
// and puts what it measured next to the simulator's prediction (docs/exec.md).
// Exit code 0: the run finished (and, with --check-eager, matched eager
// PyTorch bit for bit); 1: the run failed or differed from eager; 2: bad input.
// The verb checks its options, then calls the modules in turn: importers for
// the values (a fresh trace or a kept one), planner for auto's plan when no
// plan is given, sim for the prediction, exec for the run over the graph's
// ranks, report for what is set beside what, and prints.
#include <iostream>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "memwall/base/error.h"
#include "memwall/base/human.h"
#include "memwall/base/output_files.h"
#include "memwall/exec/nvme_space.h"
#include "memwall/exec/ranks.h"
#include "memwall/graph/graph.h"
#include "memwall/importers/kept_values.h"
#include "memwall/importers/torch_trace.h"
#include "memwall/plan/plan.h"
#include "memwall/planner/budget.h"
#include "memwall/planner/planner.h"
#include "memwall/planner/runnable_plan.h"
#include "memwall/report/chrome_trace.h"
#include "memwall/report/plan_figures.h"
#include "memwall/report/run_comparison.h"
#include "memwall/runtime/host_pool.h"
#include "memwall/sim/simulator.h"
#include "options.h"
#include "run_options.h"

namespace memwall::cli {
namespace {

// ---- The work ---------------------------------------------------------------------------

// Auto's plan for the traced graph (the graph it was made for: offload
// rewrites it), on the allocator when it holds the plan, else laid out
// (Note [Plans that run]).
void plan_traced(const RunArgs& args, RunSetup& s) {
  apply_profile_kernels(s.hw, s.graph);
  PlannerOptions options;
  options.ranks = s.ranks;
  options.zero_stage = args.zero_stage;
  options.budget = args.budget.empty() ? s.hw.device_memory_bytes
                                       : parse_budget(args.budget, s.hw,
                                                      [&] { return keep_all_peak(s.graph, s.hw); });
  const AutoPlan planned = plan_auto(s.graph, s.hw, options);
  if (!planned.best.fits) fail("run: no plan fits: {}", planned.best.why);
  s.graph = planned.best.graph;
  s.plan = planned.best.plan;
  s.hw = planned.hardware;
  if (!allocator_fit(s.graph, s.plan, s.hw, s.policy).fits) {
    if (s.device == "cuda") {
      fail(
          "run: auto's plan fits the budget of {} only at a layout's offsets, which a CUDA run "
          "does not place yet (docs/exec.md, \"A CUDA path\"): give a larger --budget",
          exact_bytes(s.plan.budget));
    }
    const RunnablePlan laid = runnable_plan(s.plan, s.graph, s.hw, /*lay_out=*/true);
    if (!laid.runs || laid.plan.offsets.empty()) {
      fail("run: auto's plan does not run within the budget of {}: {}", exact_bytes(s.plan.budget),
           laid.why_not());
    }
    s.plan = laid.plan;
  }
  // Auto chooses the tiers: an NVMe option is for the case it uses NVMe.
  if ((!args.nvme_dirs.empty() || !args.nvme_faults.empty()) &&
      exec::run_nvme_reservation(s.graph, s.plan).buffers == 0) {
    note("auto's plan puts nothing on NVMe: --nvme-dir and --nvme-faults go unused");
  }
}

// The executor's figures as report's records.
MeasuredRun measured_run(const exec::RunResult& r, int ranks) {
  MeasuredRun m{.device = r.device,
                .threads = r.threads,
                .ranks = ranks,
                .eager_losses = r.eager_losses,
                .eager_equal = r.eager_equal,
                .eager_difference = r.eager_difference,
                .arena = r.arena,
                .nvme_reserved_bytes = r.nvme_reserved_bytes};
  for (const exec::StepMeasure& x : r.steps) {
    m.steps.push_back({x.loss, x.device_peak_bytes, x.device_peak_allocated_bytes,
                       x.device_peak_reserved_bytes, x.arena_bytes, x.outputs_moved,
                       x.host_peak_bytes, x.h2d_bytes, x.d2h_bytes, x.nvme_read_bytes,
                       x.nvme_write_bytes, x.step_time_s, x.kernel_time_s, x.wait_time_s,
                       x.comm_time_s, x.overhead_s, x.overlap});
  }
  for (const exec::TraceEvent& e : r.events)
    m.events.push_back({e.lane, e.step, e.start_s, e.end_s});
  for (const exec::MemorySample& x : r.memory) {
    m.memory.push_back({x.time_s, x.device_bytes, x.host_bytes});
  }
  return m;
}

int run_run(const RunArgs& args) {
  RunSetup s;
  parse_options(args, s);
  OutputFiles outputs;
  outputs.declare(args.trace);
  if (!args.values.empty()) s.kept = importers::KeptValues(args.values);
  if (!args.graph_file.empty()) {
    given_plan(args, s);
  } else {
    model_to_trace(args, s);
  }
  const int steps = s.kept.run_steps(
      {s.steps_given, s.seed_given, s.request.ranks, args.check_eager, !args.python.empty()});
  // Note [The CUDA run]: on a GPU the values and eager's reference come
  // from its kernels.
  s.request.kernels = s.device == "cuda" ? "cuda" : "cpu";
  s.request.device = s.device == "cuda" ? "cuda" : "cpu";
  s.request.python = args.python;
  // The trace that gives the values (and, without --graph, the graph).
  const std::unique_ptr<importers::RunTrace> trace =
      s.kept.take(s.request, steps, s.seed_given.value_or(0));
  if (!args.graph_file.empty()) {
    importers::check_same_structure(s.graph, trace->graph(), args.graph_file);
  } else {
    s.graph = trace->graph();
    plan_traced(args, s);
  }
  // Without offsets the run's device is an allocator, whose live bytes hold
  // each op's workspace, not its span (Note [Workspace span]).
  // Note [Host pool blocks]: the host peak in the pool's pages.
  const SimResult predicted = simulate(s.graph, s.plan, s.hw,
                                       {.record_timeline = true,
                                        .live_scratch = s.plan.offsets.empty(),
                                        .host_block_bytes = runtime::kHostPoolAlignment});
  if (!predicted.valid) fail("run: the simulator rejects the plan: {}", predicted.reason);

  exec::RunOptions options;
  options.steps = steps;
  options.check_eager = args.check_eager;
  options.policy = s.policy;
  options.device = s.device;
  options.record_trace = !args.trace.empty();
  options.nvme_dirs = args.nvme_dirs;
  options.nvme_faults = args.nvme_faults;
  // Note [The run's own kernels]: ops are timed from the second step.
  options.time_kernels = steps > 1;
  exec::RunResult result;
  std::string error;
  const exec::Status status =
      exec::run_plan_ranks(s.graph, s.plan, trace->values_dir(), options, result, error);
  for (const std::string& line : result.notes) std::cerr << "memwall: note: " << line << "\n";
  if (status == exec::Status::kBadInput) fail("run: {}", error);
  if (status == exec::Status::kRunFailed) {
    std::cerr << "memwall: error: run failed: " << error << "\n";
    return 1;
  }

  const int ranks = exec::ranks_of(s.graph);
  const MeasuredRun measured = measured_run(result, ranks);
  if (!args.trace.empty()) {
    outputs.set(args.trace, chrome_trace_json(s.graph, s.plan, measured_timeline(measured, s.plan),
                                              "memwall run"));
    outputs.commit();
  }
  RunPrediction prediction = run_prediction(predicted);
  if (ranks == 1) {
    prediction.time_with_run_kernels = iteration_time_with_kernels(
        s.graph, s.plan, s.hw, result.kernel_seconds, runtime::kHostPoolAlignment);
  }
  if (args.json) {
    std::cout << run_comparison_json(s.graph, s.plan, s.hw.name, s.policy, measured, prediction,
                                     exec::run_nvme_reservation(s.graph, s.plan))
                     .dump(2)
              << "\n";
  } else {
    std::cout << run_comparison_text(s.graph, s.plan, s.hw.name, measured, prediction,
                                     exec::run_nvme_reservation(s.graph, s.plan));
  }
  if (result.eager_equal && !*result.eager_equal) return 1;
  return 0;
}

}  // namespace

void add_run(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "run", "execute a plan on real tensors and compare with the simulator's prediction");
  auto args = std::make_shared<RunArgs>();
  cmd->add_option("--graph", args->graph_file, "a traced graph (memwall trace) to run");
  cmd->add_option("--plan", args->plan_file, "the plan for --graph");
  (void)args->model.add_options(*cmd);
  cmd->add_option("--builtin", args->builtin, "a model of memwall's fidelity set (gpt-mini, ...)");
  args->gpu.add_options(*cmd, "");
  cmd->add_option("--budget", args->budget,
                  fmt::format("the device's bytes (the emulated device's capacity; without "
                              "--graph, auto's budget): {}",
                              kBudgetForms));
  cmd->add_option("--steps", args->steps,
                  "iterations to run (default 3, or the --keep-values directory's steps)");
  cmd->add_option("--seed", args->seed,
                  "torch.manual_seed before building the model (default 0; a --keep-values "
                  "directory's values have theirs)");
  cmd->add_flag("--check-eager", args->check_eager,
                "compare losses and model states with eager PyTorch, bit for bit");
  cmd->add_option("--policy", args->policy,
                  "device allocator of a plan without offsets: stitching (default), caching, "
                  "expandable");
  cmd->add_option("--device", args->device,
                  "where the step runs: emulated (default: this CPU as a GPU of the budget's "
                  "memory) or cuda (the GPU torch sees; docs/exec.md, \"A CUDA path\")");
  cmd->add_option("--keep-values", args->values,
                  "keep the traced values and eager's results in DIR, and reuse them when DIR "
                  "has them (without --steps, DIR's steps; --seed and --check-eager's steps must "
                  "be DIR's)");
  cmd->add_option("--nvme-dir", args->nvme_dirs,
                  "an existing directory for NVMe swap files, for plans that use NVMe (repeat to "
                  "stripe; default $TMPDIR)");
  cmd->add_option("--nvme-faults", args->nvme_faults,
                  "inject NVMe faults, as `memwall bench offload` does (docs/nvme.md)");
  cmd->add_option("--ranks", args->ranks,
                  "trace, plan and run over this many data-parallel ranks (ZeRO; one process "
                  "each)");
  cmd->add_option("--zero-stage", args->zero_stage, "with --ranks: only this ZeRO stage (0-3)");
  cmd->add_option("--python", args->python, "the interpreter that traces (default: memwall's)");
  cmd->add_option("--trace", args->trace,
                  "write a Chrome trace of the last iteration as it ran (the simulator's "
                  "layout: open it beside `memwall simulate --trace` in Perfetto)");
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([&action, args] { action = [args] { return run_run(*args); }; });
}

}  // namespace memwall::cli
