// `memwall run`: executes a plan on real tensors (the executor, src/exec)
// and puts what it measured next to the simulator's prediction (docs/exec.md).
// Exit code 0: the run finished (and, with --check-eager, matched eager
// PyTorch bit for bit); 1: the run failed or differed from eager; 2: bad input.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "budget.h"
#include "commands.h"
#include "memwall/exec/library.h"
#include "format.h"
#include "memwall/graph/error.h"
#include "memwall/graph/graph.h"
#include "memwall/graph/output_files.h"
#include "memwall/importers/torch_trace.h"
#include "memwall/plan/plan.h"
#include "memwall/planner/planner.h"
#include "memwall/report/chrome_trace.h"
#include "memwall/runtime/host_pool.h"
#include "memwall/runtime/nvme_faults.h"
#include "memwall/sim/simulator.h"
#include "options.h"
#include "plan_figures.h"
#include "memwall/exec/ranks.h"
#include "memwall/importers/kept_values.h"
#include "runnable_plan.h"
#include "memwall/runtime/probes.h"
#include "traced_model.h"

namespace memwall::cli {
namespace {

struct RunArgs {
  std::string graph_file, plan_file;
  TracedModel model;
  std::string builtin;
  GpuSource gpu;
  std::string budget;
  std::optional<std::string> steps, seed;
  bool check_eager = false;
  bool json = false;
  std::optional<std::string> policy;  // default stitching
  std::string python;
  std::string values;  // --keep-values
  std::string trace;   // --trace
  std::vector<std::string> nvme_dirs;
  std::string nvme_faults;
  std::optional<std::string> ranks;  // the one-go path: auto plans for these ranks
  std::optional<int> zero_stage;
};

// The last iteration as the simulator's timeline (Chrome trace layout of
// report/chrome_trace.h): spans per resource, device and host memory.
SimResult measured_timeline(const exec::RunResult& run, const Plan& plan) {
  SimResult r;
  r.valid = true;
  r.budget = plan.budget;
  for (const exec::TraceEvent& e : run.events) {
    r.timeline.push_back({static_cast<Resource>(e.lane), e.step, e.start_s, e.end_s});
    r.iteration_time = std::max(r.iteration_time, e.end_s);
  }
  for (const exec::MemorySample& m : run.memory) {
    r.curves[0].push_back({m.time_s, m.device_bytes});
    r.curves[1].push_back({m.time_s, m.host_bytes});
    r.peak_bytes[0] = std::max(r.peak_bytes[0], m.device_bytes);
    r.peak_bytes[1] = std::max(r.peak_bytes[1], m.host_bytes);
  }
  if (!run.steps.empty()) r.iteration_time = run.steps.back().step_time_s;
  return r;
}

std::string ratio(double measured, double predicted) {
  return predicted > 0 ? fmt::format("{:.3f}", measured / predicted) : std::string("-");
}

// What the simulator predicted, in the figures a run measures.
struct Prediction {
  double time = 0;
  uint64_t device = 0, host = 0, nvme = 0;
  // The simulator's transfer overlap: its copies' busy time not stalling
  // compute (1 - stall / busy), as the executor measures its own.
  double overlap = 0;
  std::optional<double> time_with_run_kernels;  // Note [The run's own kernels]
  std::array<uint64_t, kNumResources> bytes_moved{};
  uint64_t moved(Resource r) const { return bytes_moved[static_cast<size_t>(r)]; }
};

// Note [The run's own kernels]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A prediction from measured kernels has two errors: the kernels' times
// (calibrated minutes before the run, on a machine whose speed drifts
// between minutes: the same keep-all plan of MobileNetV2 ran 88-111 ms a
// step in runs a minute apart on the development VM) and the rest of the
// model (the executor's own time, copies, waits, contention). Each op's
// median call time in this run, put in the graph and simulated again with
// the same profile, is the step the simulator predicts for the kernels as
// they ran: its ratio to the measured step is the second error alone.
// Those times already hold what copies beside them cost the kernels, so
// the profile's compute slowdown beside copies (Note [Copy contention]) is
// left out there; the copies' own slowdown stays.
std::optional<double> predicted_with_run_kernels(Graph graph, const Plan& plan, Hardware hw,
                                                 const exec::RunResult& result) {
  hw.copy_contention.compute = 1;
  if (result.kernel_seconds.size() != graph.ops.size()) return std::nullopt;
  size_t timed = 0;
  for (Op& op : graph.ops) {
    const double t = result.kernel_seconds[static_cast<size_t>(op.id)];
    if (t > 0) {
      op.time = t;
      ++timed;
    }
  }
  if (timed == 0) return std::nullopt;
  const SimResult again = simulate(
      graph, plan, hw,
      {.live_scratch = plan.offsets.empty(), .host_block_bytes = runtime::kHostPoolAlignment});
  if (!again.valid) return std::nullopt;
  return again.iteration_time;
}

Prediction prediction_of(const SimResult& sim) {
  Prediction p;
  p.time = sim.iteration_time;
  p.device = sim.peak_bytes[0];
  p.host = sim.peak_bytes[1];
  p.nvme = sim.peak_bytes[2];
  p.bytes_moved = sim.bytes_moved;
  double copy_busy = 0;
  for (const Span& span : sim.timeline) {
    if (span.resource == Resource::kH2D || span.resource == Resource::kD2H ||
        span.resource == Resource::kNvmeRead || span.resource == Resource::kNvmeWrite) {
      copy_busy += span.end - span.start;
    }
  }
  p.overlap = copy_busy > 0 ? std::clamp(1.0 - sim.transfer_stall_time / copy_busy, 0.0, 1.0) : 0.0;
  return p;
}

size_t measured_ops(const Graph& graph) {
  return static_cast<size_t>(
      std::count_if(graph.ops.begin(), graph.ops.end(), [](const Op& op) { return op.time; }));
}

void print_json(const Graph& graph, const Plan& plan, const Hardware& hw, const std::string& policy,
                const exec::RunResult& result, const Prediction& p) {
  nlohmann::json out = {{"graph", graph.name},
                        {"hardware", hw.name},
                        {"device", result.device},
                        {"threads", result.threads},
                        {"ranks", exec::ranks_of(graph)},
                        {"budget", plan.budget},
                        {"plan_steps", plan.steps.size()},
                        {"policy", result.arena ? "plan offsets" : policy},
                        {"measured_kernel_ops", measured_ops(graph)}};
  if (result.arena) out["planned_arena_bytes"] = pinned_arena(plan, graph);
  // Note [NVMe reservation]: the swap space the run held beside the plan's figures.
  out["nvme"] = nvme_json(p.nvme, run_nvme_reservation(graph, plan));
  out["nvme"]["held_bytes"] = result.nvme_reserved_bytes;
  nlohmann::json rows = nlohmann::json::array();
  for (size_t k = 0; k < result.steps.size(); ++k) {
    const exec::StepMeasure& m = result.steps[k];
    nlohmann::json row = {
        {"step", k + 1},
        {"loss", m.loss},
        {"device_peak_bytes", {{"measured", m.device_peak_bytes}, {"predicted", p.device}}},
        {"device_peak_allocated_bytes", m.device_peak_allocated_bytes},
        {"device_peak_reserved_bytes", m.device_peak_reserved_bytes},
        {"arena_bytes", m.arena_bytes},
        {"outputs_moved", m.outputs_moved},
        {"host_peak_bytes", {{"measured", m.host_peak_bytes}, {"predicted", p.host}}},
        {"step_time_s", {{"measured", m.step_time_s}, {"predicted", p.time}}},
        {"bytes_moved",
         {{"h2d", {{"measured", m.h2d_bytes}, {"predicted", p.moved(Resource::kH2D)}}},
          {"d2h", {{"measured", m.d2h_bytes}, {"predicted", p.moved(Resource::kD2H)}}},
          {"nvme_read",
           {{"measured", m.nvme_read_bytes}, {"predicted", p.moved(Resource::kNvmeRead)}}},
          {"nvme_write",
           {{"measured", m.nvme_write_bytes}, {"predicted", p.moved(Resource::kNvmeWrite)}}}}},
        {"kernel_time_s", m.kernel_time_s},
        {"wait_time_s", m.wait_time_s},
        {"comm_time_s", m.comm_time_s},
        {"overhead_s", m.overhead_s},
        {"transfer_overlap", {{"measured", m.overlap}, {"predicted", p.overlap}}}};
    if (p.time_with_run_kernels) {
      row["step_time_s"]["predicted_with_run_kernels"] = *p.time_with_run_kernels;
    }
    if (k < result.eager_losses.size()) row["eager_loss"] = result.eager_losses[k];
    rows.push_back(std::move(row));
  }
  out["steps"] = std::move(rows);
  if (result.eager_equal) {
    out["eager_equal"] = *result.eager_equal;
    if (!*result.eager_equal) out["eager_difference"] = result.eager_difference;
  }
  std::cout << out.dump(2) << "\n";
}

void print_table(const Graph& graph, const Plan& plan, const Hardware& hw,
                 const exec::RunResult& result, const Prediction& p) {
  // Which cost model predicted: the roofline, or measured kernels for some
  // ops (Note [Measured kernels]).
  const size_t measured = measured_ops(graph);
  std::cout << fmt::format(
      "{}: {} plan steps on {} ({} threads{}), budget {}, predicted with {}{}\n", graph.name,
      plan.steps.size(), result.device, result.threads,
      exec::ranks_of(graph) > 1 ? fmt::format("; rank 0 of {}", exec::ranks_of(graph)) : std::string(),
      human_bytes(plan.budget), hw.name,
      measured == 0 ? std::string(" (roofline)")
                    : fmt::format(" ({} of {} ops' times measured)", measured, graph.ops.size()));
  std::cout << fmt::format("{:>4}  {:>12}  {:>22}  {:>22}  {:>10}  {:>10}\n", "step", "loss",
                           "device peak (x pred)", "step time (x pred)", "moved", "overhead");
  for (size_t k = 0; k < result.steps.size(); ++k) {
    const exec::StepMeasure& m = result.steps[k];
    std::cout << fmt::format(
        "{:>4}  {:>12.6g}  {:>22}  {:>22}  {:>10}  {:>9.1f}%\n", k + 1, m.loss,
        fmt::format("{} ({})", human_bytes(m.device_peak_bytes),
                    ratio(static_cast<double>(m.device_peak_bytes), static_cast<double>(p.device))),
        fmt::format("{} ({})", human_seconds(m.step_time_s), ratio(m.step_time_s, p.time)),
        human_bytes(m.h2d_bytes + m.d2h_bytes + m.nvme_read_bytes + m.nvme_write_bytes),
        m.step_time_s > 0 ? 100 * m.overhead_s / m.step_time_s : 0.0);
  }
  std::cout << field("predicted",
                     fmt::format("device peak {}, host peak {}, step {}", human_bytes(p.device),
                                 human_bytes(p.host), human_seconds(p.time)));
  if (p.time_with_run_kernels && result.steps.size() > 1) {
    std::vector<double> later;
    for (size_t k = 1; k < result.steps.size(); ++k) later.push_back(result.steps[k].step_time_s);
    const double typical = runtime::median(std::move(later));  // as bench/run_fidelity.sh takes it
    std::cout << field("with the run's kernels",
                       fmt::format("step {} predicted, {} measured ({}; the median of steps 2-{})",
                                   human_seconds(*p.time_with_run_kernels), human_seconds(typical),
                                   ratio(typical, *p.time_with_run_kernels), result.steps.size()));
  }
  if (result.arena && !result.steps.empty()) {
    const exec::StepMeasure& last = result.steps.back();
    // With offsets the arena is the device memory the run used: the figure
    // to hold against the predicted peak (docs/exec.md, "Plans with offsets").
    const auto arena = static_cast<double>(last.arena_bytes);
    const uint64_t planned = pinned_arena(plan, graph);
    std::cout << field(
        "arena (plan offsets)",
        fmt::format("{} = {:.4f}x the plan's arena of {}; {:.4f}x the predicted peak, {:.4f}x the "
                    "live peak",
                    human_bytes(last.arena_bytes), arena / static_cast<double>(planned),
                    human_bytes(planned), arena / static_cast<double>(p.device),
                    arena / static_cast<double>(last.device_peak_bytes)));
  }
  if (result.nvme_reserved_bytes > 0) {
    std::cout << field("NVMe swap space",
                       fmt::format("{} held; {}", human_bytes(result.nvme_reserved_bytes),
                                   nvme_row(p.nvme, run_nvme_reservation(graph, plan))));
  }
  if (result.eager_equal) {
    std::cout << field("eager PyTorch", *result.eager_equal
                                            ? std::string("bitwise equal (losses and model states)")
                                            : "differs: " + result.eager_difference);
  }
}

// Every --nvme-dir must take swap files: checked before any work (a
// missing one failed the run once it first swapped, exit 1).
void check_nvme_dirs(const std::vector<std::string>& dirs) {
  for (const std::string& dir : dirs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) {
      fail("run: --nvme-dir {}: {}", dir,
           std::filesystem::exists(dir, ec) ? "not a directory" : "no such directory");
    }
    if (::access(dir.c_str(), W_OK | X_OK) != 0) {
      fail("run: --nvme-dir {}: cannot write into it: {}", dir, std::strerror(errno));
    }
  }
}

int run_run(const RunArgs& args) {
  const TracedModel& model = args.model;
  const int sources = int{!args.graph_file.empty()} + int{!model.torchvision.empty()} +
                      int{!model.script.empty()} + int{!args.builtin.empty()} +
                      int{!model.hf.empty()} + int{!model.hf_config.empty()};
  if (sources != 1) {
    fail(
        "run: give --graph G --plan P, or one of --torchvision NAME, --script FILE.py:FUNCTION, "
        "--builtin NAME, --hf NAME and --hf-config FILE");
  }
  if (!args.graph_file.empty() && args.plan_file.empty()) fail("run: --graph needs --plan");
  if (args.graph_file.empty() && !args.plan_file.empty()) fail("run: --plan needs --graph");
  if (!args.graph_file.empty() && (args.ranks || args.zero_stage)) {
    fail("run: --ranks and --zero-stage plan a traced model; a --graph says its own (meta.zero)");
  }
  const int ranks =
      args.ranks ? static_cast<int>(std::min<int64_t>(parse_count(*args.ranks, "--ranks"), 1024))
                 : 1;
  if (ranks < 1) fail("run: --ranks must be 1 or more");
  exec::check_run_ranks(ranks);
  if (args.zero_stage && (*args.zero_stage < 0 || *args.zero_stage > 3)) {
    fail("run: ZeRO stage {} does not exist (0, 1, 2 or 3)", *args.zero_stage);
  }
  if (args.zero_stage && *args.zero_stage > 0 && ranks == 1) {
    fail(
        "run: --zero-stage {} shards model states across data-parallel ranks: give --ranks 2 "
        "or more",
        *args.zero_stage);
  }
  const std::optional<int> steps_given =
      args.steps ? std::optional<int>(static_cast<int>(
                       std::min<int64_t>(parse_count(*args.steps, "--steps"), 1000000)))
                 : std::nullopt;
  const std::optional<int64_t> seed_given =
      args.seed ? std::optional<int64_t>(parse_count(*args.seed, "--seed")) : std::nullopt;
  try {
    (void)runtime::parse_nvme_faults(args.nvme_faults);
  } catch (const std::invalid_argument& e) {
    fail("run: --nvme-faults: {}", e.what());
  }
  const std::string policy = args.policy.value_or("stitching");
  if (policy != "stitching" && policy != "caching" && policy != "expandable") {
    fail("run: unknown --policy '{}' (stitching, caching or expandable)", policy);
  }
  check_nvme_dirs(args.nvme_dirs);

  OutputFiles outputs;
  outputs.declare(args.trace);
  importers::KeptValues kept = args.values.empty() ? importers::KeptValues() : importers::KeptValues(args.values);
  Graph graph;
  Plan plan;
  Hardware hw;
  importers::TorchTraceRequest request;
  if (!args.graph_file.empty()) {
    if (const std::string given = model.options_given(); !given.empty()) {
      fail(
          "run: {} {} not apply to --graph {}, whose model was traced with its own options "
          "(meta.origin)",
          given, given.find(',') == std::string::npos ? "does" : "do", args.graph_file);
    }
    graph = read_graph_file(args.graph_file);
    plan = read_plan_file(args.plan_file);
    try {
      check_plan_graph(plan, graph);
      validate_plan(plan, graph);
    } catch (const Error& e) {
      fail("{}: {}", args.plan_file, e.what());
    }
    hw = args.gpu.load_for_plan(plan);
    if (!graph.meta.contains("calls")) {
      fail(
          "{}: graph \"{}\" carries no call records, so it can be planned and simulated but "
          "not run: trace the model with `memwall trace` (zoo graphs are not runnable)",
          args.graph_file, graph.name);
    }
    request = importers::request_for(graph);
    request.ranks = exec::ranks_of(graph);
    exec::check_run_ranks(request.ranks);
    apply_profile_kernels(hw, graph);
    if (!args.budget.empty()) {
      plan.budget = parse_budget(args.budget, hw, [&] { return keep_all_peak(graph, hw); });
    }
    if (args.policy && !plan.offsets.empty()) {
      fail(
          "run: --policy chooses the allocator of a plan without offsets; {} pins every buffer "
          "in its arena (memwall plan --no-layout writes one without)",
          args.plan_file);
    }
    if ((!args.nvme_dirs.empty() || !args.nvme_faults.empty()) &&
        run_nvme_reservation(graph, plan).buffers == 0) {
      fail("run: --nvme-dir and --nvme-faults apply to plans that use NVMe; {} puts nothing there",
           args.plan_file);
    }
    // Note [Plans that run]: refused before the trace, not out of memory
    // mid-run.
    if (plan.offsets.empty()) {
      const AllocatorFit fit = allocator_fit(graph, plan, hw, policy);
      if (!fit.fits) {
        fail(
            "{}: the plan has no offsets and its allocations do not fit the budget of {}: {} "
            "(Note [Plans that run]; `memwall plan --out` lays plans out)",
            args.plan_file, exact_bytes(plan.budget), fit.text());
      }
    }
    kept.check_model(request, fmt::format("{}'s model (\"{}\")", args.graph_file, graph.name));
  } else {
    if (!args.gpu.given()) {
      fail(
          "run: name the profile that predicts this run: --gpu-file FILE from `memwall "
          "calibrate` on this machine (the emulated device is this CPU), or --gpu NAME");
    }
    hw = args.gpu.load();
    if (!args.budget.empty()) {
      (void)budget_before_peak(args.budget, hw, "the traced model's, known once it is traced");
    }
    if (const std::string given = model.options_given(); !args.builtin.empty() && !given.empty()) {
      fail("run: {} {} not apply to --builtin {}, which builds its own model and batch", given,
           given.find(',') == std::string::npos ? "does" : "do", args.builtin);
    }
    model.apply(request, "run: ");
    request.builtin = args.builtin;
    request.ranks = ranks;
    kept.check_model(request, "the model asked for");
  }
  const int steps = kept.run_steps(
      {steps_given, seed_given, request.ranks, args.check_eager, !args.python.empty()});
  request.kernels = "cpu";
  request.python = args.python;
  // The trace that gives the values (and, without --graph, the graph).
  const std::unique_ptr<importers::RunTrace> traced =
      kept.take(request, steps, seed_given.value_or(0));
  const importers::RunTrace& trace = *traced;
  if (!args.graph_file.empty()) {
    importers::check_same_structure(graph, trace.graph(), args.graph_file);
  } else {
    graph = trace.graph();
    apply_profile_kernels(hw, graph);
    PlannerOptions options;
    options.ranks = ranks;
    options.zero_stage = args.zero_stage;
    options.budget = args.budget.empty()
                         ? hw.device_memory_bytes
                         : parse_budget(args.budget, hw, [&] { return keep_all_peak(graph, hw); });
    const AutoPlan planned = plan_auto(graph, hw, options);
    if (!planned.best.fits) fail("run: no plan fits: {}", planned.best.why);
    // The plan runs the graph it was made for (offload rewrites it).
    graph = planned.best.graph;
    plan = planned.best.plan;
    hw = planned.hardware;
    // Note [Plans that run]: on the allocator when it holds the plan, else
    // laid out.
    if (!allocator_fit(graph, plan, hw, policy).fits) {
      const RunnablePlan laid = runnable_plan(plan, graph, hw, /*lay_out=*/true);
      if (!laid.runs || laid.plan.offsets.empty()) {
        fail("run: auto's plan does not run within the budget of {}: {}", exact_bytes(plan.budget),
             laid.why_not());
      }
      plan = laid.plan;
    }
    // Auto chooses the tiers: an NVMe option is for the case it uses NVMe.
    if ((!args.nvme_dirs.empty() || !args.nvme_faults.empty()) &&
        run_nvme_reservation(graph, plan).buffers == 0) {
      note("auto's plan puts nothing on NVMe: --nvme-dir and --nvme-faults go unused");
    }
  }
  // Without offsets the run's device is an allocator, whose live bytes hold
  // each op's workspace, not its span (Note [Workspace span]).
  // Note [Host pool blocks]: the host peak in the pool's pages.
  const SimResult predicted = simulate(graph, plan, hw,
                                       {.record_timeline = true,
                                        .live_scratch = plan.offsets.empty(),
                                        .host_block_bytes = runtime::kHostPoolAlignment});
  if (!predicted.valid) fail("run: the simulator rejects the plan: {}", predicted.reason);

  exec::RunOptions options;
  options.steps = steps;
  options.check_eager = args.check_eager;
  options.policy = policy;
  options.record_trace = !args.trace.empty();
  options.nvme_dirs = args.nvme_dirs;
  options.nvme_faults = args.nvme_faults;
  // Note [The run's own kernels]: ops are timed from the second step.
  options.time_kernels = steps > 1;
  exec::RunResult result;
  std::string error;
  const exec::RunFunction run = exec::load_executor();
  // A ZeRO rank graph: this process is rank 0 (docs/exec.md, "Ranks").
  std::unique_ptr<exec::RankProcesses> others;
  options.ranks = exec::ranks_of(graph);
  if (options.ranks > 1) {
    others = std::make_unique<exec::RankProcesses>(graph, plan, trace.values_dir(), options);
    options.store = others->store();
  }
  exec::Status status = run(graph, plan, trace.values_dir(), options, result, error);
  if (others) {
    if (status != exec::Status::kOk) others->stop();
    exec::merge_ranks(others->wait(), status, error, result);
  }
  for (const std::string& note : result.notes) std::cerr << "memwall: note: " << note << "\n";
  if (status == exec::Status::kBadInput) fail("run: {}", error);
  if (status == exec::Status::kRunFailed) {
    std::cerr << "memwall: error: run failed: " << error << "\n";
    return 1;
  }

  if (!args.trace.empty()) {
    outputs.set(args.trace,
                chrome_trace_json(graph, plan, measured_timeline(result, plan), "memwall run"));
    outputs.commit();
  }
  Prediction prediction = prediction_of(predicted);
  if (options.ranks == 1) {
    prediction.time_with_run_kernels = predicted_with_run_kernels(graph, plan, hw, result);
  }
  if (args.json) {
    print_json(graph, plan, hw, policy, result, prediction);
  } else {
    print_table(graph, plan, hw, result, prediction);
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
