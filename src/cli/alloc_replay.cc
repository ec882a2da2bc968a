// `memwall alloc-replay`: the allocations and frees of a graph's default
// schedule, of a plan or of a lifetimes CSV, replayed through the runtime
// allocator's policies (src/alloc) on a simulated device; peak reserved
// against peak allocated, and whether the device's capacity holds it.
// Exit code 0: every policy replayed fits; 1: one does not (or, said in one
// line without replaying, none can); 2: bad input.
#include <iostream>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "alloc_runner.h"
#include "commands.h"
#include "memwall/base/error.h"
#include "memwall/layout/csv.h"
#include "memwall/plan/plan.h"
#include "memwall/planner/plan_layout.h"
#include "memwall/report/format.h"
#include "options.h"

namespace memwall::cli {
namespace {

struct ReplayArgs {
  std::string csv_file;
  std::string plan_file;
  GraphSource source;
  GpuSource gpu;
  AllocFlags flags;
  bool json = false;
};

AllocTrace load_trace(const ReplayArgs& args, const Hardware& hw) {
  if (!args.csv_file.empty()) {
    if (!args.plan_file.empty() || args.source.given()) {
      fail("--csv takes no --model, --graph or --plan: replay one input at a time");
    }
    return csv_alloc_trace(read_lifetimes_csv(args.csv_file, "replay"), args.csv_file);
  }
  const Graph graph = args.source.load(hw);
  if (args.plan_file.empty()) return graph_alloc_trace(graph);
  const SimulatedPlan plan = simulate_plan_file(args.plan_file, graph, hw);
  AllocTrace trace = plan_alloc_trace(graph, plan.plan, plan.sim);
  trace.name = args.plan_file;
  return trace;
}

nlohmann::json replay_json(const PolicyReplay& r) {
  const alloc::Stats& s = r.result.stats;
  nlohmann::json j = {{"policy", r.policy},
                      {"fits", r.result.fits},
                      {"peak_requested", s.peak_requested_bytes},
                      {"peak_allocated", s.peak_allocated_bytes},
                      {"peak_reserved", s.peak_reserved_bytes},
                      {"peak_reserved_unlimited", r.unlimited_peak_reserved},
                      {"fragmentation", s.fragmentation()},
                      {"segments", s.segments_created},
                      {"chunks", s.chunks_created},
                      {"maps", s.maps},
                      {"stitches", s.stitches},
                      {"cache_flushes", s.cache_flushes},
                      {"oom_events", s.oom_events}};
  if (!r.result.fits) j["failed_event"] = r.result.failed_event;
  return j;
}

int run_replay(const ReplayArgs& args) {
  // A plan is replayed on the hardware it was made for, unless --gpu says.
  const Hardware hw = args.plan_file.empty()
                          ? args.gpu.load()
                          : args.gpu.load_for_plan(read_plan_file(args.plan_file));
  const AllocSetup setup = args.flags.parse(hw);
  AllocTrace trace = load_trace(args, hw);
  if (trace.allocations.empty()) fail("{}: no allocations to replay", trace.name);
  // Said at once: no replay can change the answer.
  if (const std::optional<std::string> why = beyond_any_policy(trace, setup)) {
    std::cerr << "memwall: does not fit under any policy: " << *why << "\n";
    return 1;
  }
  const std::vector<PolicyReplay> runs = replay_policies(trace, setup);
  bool all_fit = true;
  for (const PolicyReplay& r : runs) all_fit = all_fit && r.result.fits;
  const uint64_t live = peak_live_bytes(trace);

  if (args.json) {
    nlohmann::json j = {{"input", trace.name},
                        {"allocations", trace.allocations.size()},
                        {"peak_live", live},
                        {"capacity", setup.capacity},
                        {"granularity", setup.granularity}};
    if (trace.layout)
      j["layout"] = {{"source", trace.layout_source}, {"arena", trace.layout->arena}};
    j["policies"] = nlohmann::json::array();
    for (const PolicyReplay& r : runs) j["policies"].push_back(replay_json(r));
    std::cout << j.dump(2) << "\n";
    return all_fit ? 0 : 1;
  }
  std::cout << fmt::format("{}: {} allocations, {} live at most\n", trace.name,
                           grouped(trace.allocations.size()), exact_bytes(live));
  std::cout << field(
      "device", fmt::format("simulated, {} capacity ({}), {} chunks", exact_bytes(setup.capacity),
                            setup.capacity_source, human_bytes(setup.granularity)));
  if (trace.layout) {
    std::cout << field("plan policy's layout", fmt::format("{}, arena {}", trace.layout_source,
                                                           exact_bytes(trace.layout->arena)));
  }
  std::cout << "\n" << replay_table(runs, live);
  return all_fit ? 0 : 1;
}

}  // namespace

void add_alloc_replay(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "alloc-replay",
      "replay a schedule's allocations through the runtime allocator: reserved vs allocated");
  auto args = std::make_shared<ReplayArgs>();
  cmd->add_option("--csv", args->csv_file, "id,lower,upper,size lifetimes (MiniMalloc's format)");
  cmd->add_option("--plan", args->plan_file,
                  "replay a memwall.plan/1 plan of --model/--graph (stays from the simulator)");
  args->source.add_options(*cmd, "gpt2-small");
  args->gpu.add_options(*cmd, "a100-80g");
  args->flags.add_options(*cmd);
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([&action, args] { action = [args] { return run_replay(*args); }; });
}

}  // namespace memwall::cli
