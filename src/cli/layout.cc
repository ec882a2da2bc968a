// `memwall layout`: an address for every buffer of a lifetimes CSV, of a
// graph's default schedule or of a plan, with the arena, the lower bound,
// their ratio and the time taken. Exit code 0: a layout within the capacity
// (if any); 1: none found; 2: bad input.
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "memwall/base/error.h"
#include "memwall/base/output_files.h"
#include "memwall/layout/csv.h"
#include "memwall/layout/from_graph.h"
#include "memwall/layout/problem.h"
#include "memwall/layout/registry.h"
#include "memwall/plan/builders.h"
#include "memwall/plan/plan.h"
#include "memwall/planner/plan_layout.h"
#include "memwall/report/exports.h"
#include "memwall/report/format.h"
#include "memwall/sim/simulator.h"
#include "options.h"

namespace memwall::cli {
namespace {

struct LayoutArgs {
  std::string csv_file;
  std::string plan_file;
  GraphSource source;
  GpuSource gpu;
  std::string capacity;
  std::string alignment;  // default: 64 for a plan (Note [Plans laid out by default]), else 1
  std::string algorithm = "default";
  double time_limit = 1.0;
  std::string out;
  bool json = false;
  bool graph_given = false;  // --model or --graph on the command line
};

// What is being laid out, and how to write the result.
struct Input {
  std::string name;
  LayoutProblem problem;
  // Graph and plan inputs: the plan that gets the offsets, the graph and
  // the residencies to check it with.
  std::optional<Graph> graph;
  std::optional<Plan> plan;
  std::optional<Hardware> hw;
  SimResult sim;
  std::optional<StayLayoutProblem> stays;  // a plan's: `problem` is its problem
};

Input load_input(const LayoutArgs& args) {
  Input in;
  if (!args.csv_file.empty()) {
    if (args.graph_given || !args.plan_file.empty()) {
      fail("--csv takes no --model, --graph or --plan: lay out one input at a time");
    }
    in.name = args.csv_file;
    in.problem = read_lifetimes_csv(args.csv_file, "lay out").problem;
    return in;
  }
  if (args.plan_file.empty()) {
    in.hw = args.gpu.load();
    in.graph = args.source.load(*in.hw);
    // The default schedule: lifetimes in op indices (from_graph.h). Its
    // plan gets the offsets when a plan is written.
    in.name = in.graph->name + " (default schedule)";
    in.problem = layout_problem(*in.graph);
    in.plan = default_plan(*in.graph, in.hw->name, in.hw->device_memory_bytes);
    // Pinned into the plan, the offsets must lie within its budget.
    if (args.out.ends_with(".json")) in.problem.capacity = in.plan->budget;
    return in;
  }
  in.name = args.plan_file;
  Plan plan = read_plan_file(args.plan_file);
  in.hw = args.gpu.load_for_plan(plan);
  in.graph = args.source.load(*in.hw);
  // The plan's own offsets, if any, are replaced.
  SimulatedPlan simulated =
      simulate_plan_file(args.plan_file, std::move(plan), *in.graph, *in.hw, true);
  in.plan = std::move(simulated.plan);
  in.sim = std::move(simulated.sim);
  // The plan's arena is its budget.
  // Note [Offsets per stay]: an address per device stay and workspace.
  in.stays = stay_layout_problem(*in.graph, *in.plan, in.sim.residencies, in.sim.workspaces,
                                 in.plan->budget);
  in.problem = in.stays->problem;
  return in;
}

// The CSV, or the plan with offsets after the simulator accepts it.
void write_output(OutputFiles& outputs, const LayoutArgs& args, const Input& in,
                  const Layout& layout) {
  if (args.out.ends_with(".csv")) {
    outputs.set(args.out, layout_to_csv(in.problem, layout));
    return;
  }
  const Plan pinned = pin_layout(*in.graph, *in.plan, *in.hw, in.problem, layout,
                                 in.stays ? &*in.stays : nullptr, in.sim.residencies);
  outputs.set(args.out, plan_text_for(pinned, *in.graph));
}

int run_layout_command(const LayoutArgs& args) {
  if (!(args.time_limit > 0) || args.time_limit > 86400) {
    fail("--time-limit must be a number of seconds in (0, 86400] (got {})", args.time_limit);
  }
  if (!args.out.empty() && !args.out.ends_with(".csv") && !args.csv_file.empty()) {
    fail("--out {}: a CSV input lays out to a .csv file", args.out);
  }
  OutputFiles outputs;
  outputs.declare(args.out);
  Input in = load_input(args);
  const std::string alignment = !args.alignment.empty()  ? args.alignment
                                : args.plan_file.empty() ? "1"
                                                         : "64";
  in.problem.alignment = static_cast<uint64_t>(parse_count(alignment, "--alignment"));
  // Errors from the layout code (sizes that overflow) name the input.
  const auto about_input = [&](auto&& work) {
    try {
      return work();
    } catch (const Error& e) {
      fail("{}: {}", in.name, e.what());
    }
  };
  about_input([&] {
    validate_problem(in.problem);
    return 0;
  });
  if (!args.capacity.empty()) {
    if (in.problem.capacity > 0) {
      fail("--capacity: a plan's arena is its budget ({} bytes)", in.problem.capacity);
    }
    const uint64_t live = about_input([&] { return live_lower_bound(in.problem); });
    in.problem.capacity = parse_bytes(args.capacity, "--capacity", live);
  }
  const LayoutRun run =
      about_input([&] { return run_layout(in.problem, args.algorithm, args.time_limit); });
  const bool ok = run.fits();
  if (ok && !args.out.empty()) {
    write_output(outputs, args, in, *run.layout);
    outputs.commit();
  }

  const uint64_t capacity = in.problem.capacity;
  if (args.json) {
    nlohmann::json j = {{"input", in.name},
                        {"buffers", in.problem.buffers.size()},
                        {"alignment", in.problem.alignment},
                        {"algorithm", run.algorithm},
                        {"found_by", run.found_by},
                        {"lower_bound", run.lower_bound},
                        {"optimal", run.optimal},
                        {"fits", ok},
                        {"seconds", run.seconds}};
    j["capacity"] = capacity > 0 ? nlohmann::json(capacity) : nlohmann::json(nullptr);
    j["arena"] = run.layout ? nlohmann::json(run.layout->arena) : nlohmann::json(nullptr);
    // No ratio to a lower bound of 0 (a problem of nothing but empty lifetimes).
    j["ratio"] =
        run.layout && run.lower_bound > 0 ? nlohmann::json(run.ratio()) : nlohmann::json(nullptr);
    if (ok && !args.out.empty()) j["out"] = args.out;
    std::cout << j.dump(2) << "\n";
    return ok ? 0 : 1;
  }
  const auto line = [](std::string_view label, const std::string& value) {
    std::cout << fmt::format("  {:<22}{}\n", label, value);
  };
  const auto bytes = [](uint64_t b) {
    return fmt::format("{} B ({})", grouped(b), human_bytes(b));
  };
  std::cout << fmt::format("{}: {} buffers, alignment {}\n", in.name,
                           grouped(in.problem.buffers.size()), in.problem.alignment);
  line("algorithm", run.algorithm == "default" && run.found_by != run.algorithm
                        ? fmt::format("default (won by {})", run.found_by)
                        : run.algorithm);
  if (run.layout) {
    line("arena", bytes(run.layout->arena));
  } else {
    line("arena", run.infeasible ? "none: proven not to fit the capacity"
                                 : "none found within the time limit");
  }
  line("lower bound", bytes(run.lower_bound));
  if (run.layout && run.lower_bound > 0) {
    line("arena / lower bound",
         fmt::format("{:.4f}{}", run.ratio(), run.optimal ? " (optimal)" : ""));
  }
  if (capacity > 0) {
    line("capacity", fmt::format("{}: {}", bytes(capacity), ok ? "fits" : "does not fit"));
  }
  line("time", human_seconds(run.seconds));
  if (ok && !args.out.empty()) line("written to", args.out);
  return ok ? 0 : 1;
}

}  // namespace

void add_layout(CLI::App& app, Action& action) {
  auto* cmd =
      app.add_subcommand("layout", "an address for every buffer: arena, lower bound, ratio, time");
  auto args = std::make_shared<LayoutArgs>();
  cmd->add_option("--csv", args->csv_file, "id,lower,upper,size lifetimes (MiniMalloc's format)");
  cmd->add_option(
      "--plan", args->plan_file,
      "lay out a memwall.plan/1 plan of --model/--graph (lifetimes from the simulator)");
  args->source.add_options(*cmd, "gpt2-small");
  args->gpu.add_options(*cmd, "a100-80g");
  cmd->add_option("--capacity", args->capacity,
                  "arena bytes available: bytes, 1MiB, or a percentage of the live lower bound");
  cmd->add_option("--alignment", args->alignment,
                  "every offset a multiple of it (a power of two; default 64 for a plan, as "
                  "PyTorch's CPU allocator aligns, else 1)");
  cmd->add_option("--algo", args->algorithm,
                  "default, greedy-by-size, greedy-by-breadth, greedy-by-conflicts, "
                  "best-fit-by-size, best-fit-by-duration, best-fit or exact")
      ->capture_default_str();
  cmd->add_option("--time-limit", args->time_limit, "CPU seconds for default and exact")
      ->capture_default_str();
  cmd->add_option("--out", args->out,
                  "write the layout: FILE.csv (an offset column), or FILE.json (the plan with "
                  "offsets; --model/--graph/--plan)");
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([&action, args, cmd] {
    args->graph_given = cmd->count("--model") + cmd->count("--graph") > 0;
    action = [args] { return run_layout_command(*args); };
  });
}

}  // namespace memwall::cli
