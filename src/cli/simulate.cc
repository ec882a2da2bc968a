// `memwall simulate`: judges a plan (or the default plan) with the simulator
// and prints its figures; optionally exports a Chrome trace and an SVG plot.
// Exit code 0: the plan is valid; 1: it is invalid (the reason is printed);
// 2: bad input.
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "memwall/planner/budget.h"
#include "commands.h"
#include "memwall/base/error.h"
#include "memwall/base/output_files.h"
#include "memwall/graph/graph.h"
#include "memwall/plan/builders.h"
#include "memwall/plan/plan.h"
#include "memwall/report/exports.h"
#include "memwall/report/format.h"
#include "memwall/sim/simulator.h"
#include "options.h"
#include "plan_figures.h"

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

constexpr std::array<Resource, 4> kLinks = {Resource::kH2D, Resource::kD2H, Resource::kNvmeRead,
                                            Resource::kNvmeWrite};

uint64_t moved(const SimResult& r, Resource link) {
  return r.bytes_moved[static_cast<size_t>(link)];
}

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
  // A rank's graph runs on its share of the node (Note [Ranks on a node]).
  const int ranks = graph_ranks(graph);
  const auto k = static_cast<uint64_t>(ranks_per_node(hw, ranks));
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

  if (args.json) {
    nlohmann::json out = {{"graph", graph.name},
                          {"gpu", hw.name},
                          {"plan_gpu", plan.hardware},
                          {"plan", args.plan_file.empty() ? "default" : args.plan_file},
                          {"steps", plan.steps.size()},
                          {"valid", r.valid},
                          {"budget", r.budget},
                          {"iteration_time_s", r.iteration_time},
                          {"compute_time_s", r.compute_time},
                          {"compute_busy_fraction", r.compute_busy_fraction},
                          {"transfer_stall_s", r.transfer_stall_time},
                          {"host_compute_s", r.host_compute_time},
                          {"ranks", ranks},
                          {"gpus_per_node", hw.gpus_per_node},
                          {"ranks_per_node", k}};
    if (!r.valid) {
      out["failed_step"] = r.failed_step;
      out["reason"] = r.reason;
    }
    nlohmann::json links = nlohmann::json::object();
    for (const Resource link : kLinks) links[to_string(link)] = moved(r, link);
    out["bytes_moved"] = links;
    nlohmann::json peaks = nlohmann::json::object();
    for (int t = 0; t < kNumTiers; ++t) peaks[to_string(static_cast<Tier>(t))] = r.peak_bytes[t];
    out["peak_bytes"] = peaks;
    out["node_host_peak_bytes"] = checked_mul(r.peak_bytes[1], k, "host bytes");
    out["node_nvme_peak_bytes"] = checked_mul(r.peak_bytes[2], k, "NVMe bytes");
    out["nvme"] = nvme_json(r.peak_bytes[2], run_nvme_reservation(graph, plan));
    std::cout << out.dump(2) << "\n";
    return r.valid ? 0 : 1;
  }

  const auto line = [](std::string_view label, const std::string& value) {
    std::cout << field(label, value);
  };
  std::cout << fmt::format("{} on {}: {} ({} steps)\n", graph.name, hw.name,
                           args.plan_file.empty() ? std::string("default plan") : args.plan_file,
                           grouped(plan.steps.size()));
  if (ranks > 1) line("ranks", ranks_row(hw, ranks));
  line("valid", r.valid ? std::string("yes") : fmt::format("no: {}", r.reason));
  // An invalid plan is simulated up to its first failing step only.
  line(r.valid ? "iteration time" : "simulated until", human_seconds(r.iteration_time));
  line("compute busy",
       fmt::format("{:.1f}% ({})", 100 * r.compute_busy_fraction, human_seconds(r.compute_time)));
  line("stalled on transfers", human_seconds(r.transfer_stall_time));
  if (r.host_compute_time > 0) line("host compute", human_seconds(r.host_compute_time));
  line("peak device memory", fmt::format("{} at {} (budget {})", human_bytes(r.peak_bytes[0]),
                                         human_seconds(r.peak_time[0]), human_bytes(r.budget)));
  const auto on_node = [&](uint64_t bytes) {
    if (k == 1) return human_bytes(bytes);
    return fmt::format("{} on the node ({} ranks x {})",
                       human_bytes(checked_mul(bytes, k, "node bytes")), k, human_bytes(bytes));
  };
  if (r.peak_bytes[1] > 0) {
    line("peak host memory",
         fmt::format("{} of {}", on_node(r.peak_bytes[1]), human_bytes(hw.host_memory_bytes)));
  }
  if (r.peak_bytes[2] > 0) {
    const std::string reserved = nvme_row(r.peak_bytes[2], run_nvme_reservation(graph, plan));
    line("peak NVMe", k == 1 ? reserved : on_node(r.peak_bytes[2]) + "; per rank " + reserved);
  }
  line("moved h2d / d2h", fmt::format("{} / {}", human_bytes(moved(r, Resource::kH2D)),
                                      human_bytes(moved(r, Resource::kD2H))));
  if (moved(r, Resource::kNvmeRead) + moved(r, Resource::kNvmeWrite) > 0) {
    line("moved NVMe read / write",
         fmt::format("{} / {}", human_bytes(moved(r, Resource::kNvmeRead)),
                     human_bytes(moved(r, Resource::kNvmeWrite))));
  }
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
