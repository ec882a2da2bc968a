// `memwall plan --strategy auto` (the default) and the single techniques:
// memwall's automatic planner (src/planner) with its summary, its gap to the
// lower bound and the side-by-side table of single techniques; and the
// capacity searches --max-batch and --max-model (Note [Batch search] in
// src/planner/capacity.cc), which report each plan they try on stderr. Every
// figure comes from the simulator. Exit code 0: a plan; 2: bad input, or
// nothing fits (the message names the resource that runs out).
#include <algorithm>
#include <functional>
#include <iostream>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "budget.h"
#include "format.h"
#include "memwall/base/deadline.h"
#include "memwall/base/error.h"
#include "memwall/base/output_files.h"
#include "memwall/graph/graph.h"
#include "memwall/planner/planner.h"
#include "memwall/swap/zero.h"
#include "plan_args.h"
#include "plan_figures.h"
#include "remat_runner.h"
#include "runnable_plan.h"

namespace memwall::cli {
namespace {

// `graph`: the model planned, or null for --max-batch and --max-model,
// whose keep-all peak changes with what they search.
PlannerOptions planner_options(const PlanArgs& args, const Hardware& hw, const Graph* graph) {
  PlannerOptions o;
  o.time_limit = checked_time_limit(args.time_limit);
  if (graph == nullptr && budget_of_peak(args.budget)) {
    fail(
        "--budget {}: the keep-all peak changes with the {} that --max-batch and --max-model "
        "search; give bytes or a share of the GPU's memory (N%gpu)",
        args.budget, args.max_batch ? "batch" : "model");
  }
  if (!args.budget.empty()) {
    o.budget = graph != nullptr
                   ? parse_budget(args.budget, hw, [&] { return keep_all_peak(*graph, hw); })
                   : *budget_before_peak(args.budget, hw, "the searched model's, which changes");
  }
  if (args.ranks) {
    // graph_ranks (hw) accepts at most 2^20: a larger count is refused, not capped.
    const int64_t ranks = parse_count(*args.ranks, "--ranks");
    if (ranks > (1 << 20)) fail("--ranks {} is more than 2^20 ranks", ranks);
    o.ranks = static_cast<int>(ranks);
  }
  o.zero_stage = args.zero_stage;
  if (!args.host_memory.empty()) {
    o.host_bytes = parse_bytes(args.host_memory, "--host-memory", hw.host_memory_bytes);
  }
  if (!args.nvme.empty()) o.nvme_bytes = parse_bytes(args.nvme, "--nvme", 0);
  if (o.budget > hw.device_memory_bytes) {
    fail("--budget {} is more than the GPU's {} bytes", o.budget, hw.device_memory_bytes);
  }
  return o;
}

// What a plan does, counted from its steps.
struct PlanFacts {
  size_t recomputed_ops = 0;
  double recomputed_flops = 0;
  size_t swapped = 0;  // activations (and other temporaries) swapped out
  uint64_t swapped_bytes = 0;
  uint64_t offloaded[kNumTiers]{};  // model-state bytes starting off the device, by tier
};

PlanFacts facts_of(const Graph& g, const Plan& plan) {
  PlanFacts f;
  std::set<BufferId> swapped;
  for (const Step& s : plan.steps) {
    if (s.kind == StepKind::kRecompute) {
      ++f.recomputed_ops;
      f.recomputed_flops += g.ops[s.op].flops;
    }
    if (s.kind == StepKind::kSwapOut) {
      const BufferKind k = g.buffers[s.buf].kind;
      if ((k == BufferKind::kActivation || k == BufferKind::kTemp) &&
          swapped.insert(s.buf).second) {
        f.swapped_bytes += g.buffers[s.buf].bytes;
      }
    }
  }
  f.swapped = swapped.size();
  for (const auto& [buf, tier] : plan.placement)
    f.offloaded[static_cast<size_t>(tier)] += g.buffers[buf].bytes;
  return f;
}

std::string link_row(const SimResult& sim) {
  const auto moved = [&](Resource r) { return sim.bytes_moved[static_cast<size_t>(r)]; };
  return fmt::format("h2d {}, d2h {}, nvme read {}, nvme write {}, collectives {}",
                     human_bytes(moved(Resource::kH2D)), human_bytes(moved(Resource::kD2H)),
                     human_bytes(moved(Resource::kNvmeRead)),
                     human_bytes(moved(Resource::kNvmeWrite)), human_bytes(moved(Resource::kComm)));
}

// The configurations the search skipped, one row per reason (usually one:
// the graph's optimizer step, which every rewrite needs).
std::vector<std::string> skipped_rows(const AutoPlan& a) {
  std::vector<std::string> rows;
  for (size_t i = 0; i < a.skipped.size(); ++i) {
    bool seen = false;
    size_t count = 0;
    for (size_t j = 0; j < a.skipped.size(); ++j) {
      if (a.skipped[j].why != a.skipped[i].why) continue;
      seen |= j < i;
      ++count;
    }
    if (seen) continue;
    rows.push_back(field("skipped", fmt::format("{} configuration{} ({}{}): {}", count,
                                                count == 1 ? "" : "s", a.skipped[i].config.name(),
                                                count == 1 ? "" : ", ...", a.skipped[i].why)));
  }
  return rows;
}

std::string technique_table(const AutoPlan& a) {
  std::string out = fmt::format("  {:<15}{:<5}{:>12}{:>10}{:>13}  {}\n", "technique", "fits",
                                "iteration", "vs auto", "device peak", "placement / why not");
  const auto row = [&](const Candidate& c) {
    if (!c.fits) {
      out += fmt::format("  {:<15}{:<5}{:>12}{:>10}{:>13}  {}\n", c.technique, "no", "-", "-", "-",
                         c.why.size() > 110 ? c.why.substr(0, 107) + "..." : c.why);
      return;
    }
    out += fmt::format("  {:<15}{:<5}{:>12}{:>10}{:>13}  {}; {}\n", c.technique, "yes",
                       human_seconds(c.sim.iteration_time),
                       fmt::format("{:.2f}x", c.sim.iteration_time / a.best.sim.iteration_time),
                       human_bytes(c.sim.peak_bytes[0]), c.states.name(), c.activations);
  };
  row(a.best);
  for (const Candidate& c : a.singles) row(c);
  return out;
}

nlohmann::json candidate_json(const Candidate& c) {
  nlohmann::json j = {{"technique", c.technique},
                      {"fits", c.fits},
                      {"activations", c.activations},
                      {"zero_stage", c.states.stage},
                      {"optimizer_on", to_string(c.states.optimizer)},
                      {"optimizer_host_share", c.states.optimizer_host_share},
                      {"optimizer_device_share", c.states.optimizer_device_share},
                      {"params_on", to_string(c.states.params)}};
  if (c.fits) {
    j["iteration_time_s"] = c.sim.iteration_time;
    j["peak_bytes"] = c.sim.peak_bytes[0];
    j["host_peak_bytes"] = c.sim.peak_bytes[1];
  } else {
    j["why"] = c.why;
    // What ran out as numbers, when known (Note [What ran out]).
    if (c.short_of.limit > 0) {
      j["short_of"] = {{"memory", to_string(c.short_of.memory)},
                       {"need_bytes", c.short_of.need},
                       {"limit_bytes", c.short_of.limit}};
    }
  }
  return j;
}

// What write_outputs wrote: rows for the terminal, and the plan's layout
// for --json (null without --out or with --no-layout).
struct Written {
  std::vector<std::string> rows;
  nlohmann::json layout;
};

// Writes --out (laid out: Note [Plans laid out by default]), --out-graph,
// --trace and --svg for the chosen plan (all declared in `outputs` before
// the work, but the default --out-graph path).
Written write_outputs(OutputFiles& outputs, const PlanArgs& args, const Graph& input,
                      const Candidate& c, const Hardware& hw,
                      const RunnablePlan* runnable = nullptr) {
  Written written;
  std::vector<std::string>& rows = written.rows;
  // zero_rank_graph and offload_graph name every graph they rewrite.
  const bool rewritten = c.graph.name != input.name;
  std::string graph_out = args.out_graph;
  if (graph_out.empty() && rewritten && !args.out.empty()) {
    graph_out = (args.out.ends_with(".json") ? args.out.substr(0, args.out.size() - 5) : args.out) +
                ".graph.json";
  }
  if (!graph_out.empty()) {
    if (args.out_graph.empty()) outputs.declare(graph_out);
    outputs.set(graph_out, graph_text_for(hw, c.graph));
    rows.push_back(field("graph written to", graph_out));
  }
  if (!args.out.empty()) {
    // Note [Plans that run]: what runs, or nothing.
    std::optional<RunnablePlan> own;
    const RunnablePlan& r = runnable != nullptr
                                ? *runnable
                                : own.emplace(runnable_plan(c.plan, c.graph, hw, !args.no_layout));
    if (!r.runs) {
      fail("{}: the plan within the budget of {} does not run there: {}", args.strategy,
           exact_bytes(c.plan.budget), r.why_not());
    }
    outputs.set(args.out, plan_text_for(r.plan, c.graph));
    rows.push_back(field("laid out", r.row_text()));
    written.layout = r.json();
    rows.push_back(field("plan written to", args.out));
  }
  if (!args.exports.trace_file.empty() || !args.exports.svg_file.empty()) {
    const SimResult sim = simulate(c.graph, c.plan, hw, args.exports.sim_options());
    args.exports.write(outputs, c.graph, c.plan, hw, sim);
  }
  outputs.commit();
  return written;
}

// Note [Planning for the layout]: a plan within the budget may still have
// no layout within it: parameters streamed in per use and kept apart
// between their forward and backward runs fragment the arena (Llama-2-7B's
// demo plan needs 1.067x its live peak). Nor may the stitching allocator
// hold it. Then memwall plans again for less (Note [Plans that run],
// plan_until_it_runs) and keeps the new plan when it runs in the whole
// budget, with the whole budget's bound and table.
RunnablePlan make_runnable(AutoPlan& a, const PlanArgs& args,
                           const std::function<AutoPlan(uint64_t)>& plan_for,
                           uint64_t& planned_for) {
  AutoPlan again;
  const PlanFor replan = [&](uint64_t lower) -> std::optional<RunnablePlan> {
    try {
      again = plan_for(lower);
    } catch (const Error&) {
      return std::nullopt;
    }
    if (!again.best.fits) return std::nullopt;
    again.best.plan.budget = a.budget;  // it runs in the whole budget
    return runnable_plan(again.best.plan, again.best.graph, again.hardware, !args.no_layout);
  };
  const auto adopt = [&] {
    again.best.sim.budget = a.budget;
    again.budget = a.budget;
    again.bound = a.bound;
    again.singles = std::move(a.singles);
    again.solve_seconds += a.solve_seconds;
    again.configs_tried += a.configs_tried;
    a = std::move(again);
  };
  return plan_until_it_runs(runnable_plan(a.best.plan, a.best.graph, a.hardware, !args.no_layout),
                            a.budget, args.strategy, replan, adopt, planned_for);
}

void print_plan(const PlanArgs& args, const Graph& graph, const AutoPlan& a, const Hardware& hw,
                int ranks, const Written& written) {
  const Candidate& c = a.best;
  const SimResult& sim = c.sim;
  const PlanFacts f = facts_of(c.graph, c.plan);
  const auto k = static_cast<uint64_t>(ranks_per_node(a.hardware, ranks));
  const Throughput throughput = plan_throughput(graph, sim.iteration_time, hw, ranks);
  std::cout << fmt::format("{} on {}: {}\n", graph.name, hw.name, args.strategy);
  if (ranks > 1) std::cout << field("ranks", ranks_row(a.hardware, ranks));
  std::string budget = exact_bytes(a.budget);
  if (args.budget.empty()) {
    budget += fmt::format(": {} less a {} framework reserve", human_bytes(hw.device_memory_bytes),
                          human_bytes(framework_reserve(hw)));
  }
  std::cout << field("budget", budget);
  std::cout << field("model states", c.states.name());
  std::cout << field("activations", c.activations);
  std::cout << field("iteration time", human_seconds(sim.iteration_time));
  std::cout << field("throughput", throughput_row(throughput, sim.iteration_time));
  std::cout << field("lower bound", fmt::format("{} ({}); the plan is {:.2f}x of it",
                                                human_seconds(a.bound.seconds), a.bound.why,
                                                sim.iteration_time / a.bound.seconds));
  std::cout << field("time split", time_split_row(sim));
  std::cout << field("peak device memory", fmt::format("{} at {}", exact_bytes(sim.peak_bytes[0]),
                                                       human_seconds(sim.peak_time[0])));
  if (k == 1) {
    std::cout << field("peak host memory", fmt::format("{} of {}", human_bytes(sim.peak_bytes[1]),
                                                       human_bytes(a.hardware.host_memory_bytes)));
    if (sim.peak_bytes[2] > 0) {
      std::cout << field("peak NVMe use",
                         nvme_row(sim.peak_bytes[2], run_nvme_reservation(c.graph, c.plan)));
    }
  } else {
    std::cout << field(
        "peak host memory",
        fmt::format("{} of {} on the node ({} ranks x {})",
                    human_bytes(checked_mul(sim.peak_bytes[1], k, "host bytes")),
                    human_bytes(a.hardware.host_memory_bytes), k, human_bytes(sim.peak_bytes[1])));
    if (sim.peak_bytes[2] > 0) {
      std::cout << field(
          "peak NVMe use",
          fmt::format("{} on the node ({} ranks x {})",
                      human_bytes(checked_mul(sim.peak_bytes[2], k, "NVMe bytes")), k,
                      nvme_row(sim.peak_bytes[2], run_nvme_reservation(c.graph, c.plan))));
    }
  }
  std::cout << field("recomputed", fmt::format("{} ops, {}", grouped(f.recomputed_ops),
                                               human_flops(f.recomputed_flops)));
  std::cout << field("swapped activations", fmt::format("{} buffers, {}", grouped(f.swapped),
                                                        human_bytes(f.swapped_bytes)));
  std::cout << field(
      "offloaded states",
      fmt::format("host {}, nvme {}", human_bytes(f.offloaded[1]), human_bytes(f.offloaded[2])));
  std::cout << field("bytes over links", link_row(sim));
  std::cout << field("solve time", fmt::format("{} ({} configurations searched)",
                                               human_seconds(a.solve_seconds), a.configs_tried));
  for (const std::string& row : skipped_rows(a)) std::cout << row;
  for (const std::string& row : written.rows) std::cout << row;
  std::cout << args.exports.written_rows();
  std::cout << "\nthe same work under each single technique:\n" << technique_table(a);
}

nlohmann::json plan_json(const Graph& graph, const AutoPlan& a, const Hardware& hw, int ranks) {
  const Candidate& c = a.best;
  const PlanFacts f = facts_of(c.graph, c.plan);
  const auto k = static_cast<uint64_t>(ranks_per_node(a.hardware, ranks));
  nlohmann::json j = candidate_json(c);
  j["throughput"] = throughput_json(plan_throughput(graph, c.sim.iteration_time, hw, ranks));
  j["time_split_s"] = time_split_json(c.sim);
  j["graph"] = graph.name;
  j["gpu"] = hw.name;
  j["ranks"] = ranks;
  j["gpus_per_node"] = a.hardware.gpus_per_node;
  j["ranks_per_node"] = k;
  j["node_host_memory_bytes"] = a.hardware.host_memory_bytes;
  j["node_host_peak_bytes"] = checked_mul(c.sim.peak_bytes[1], k, "host bytes");
  j["node_nvme_peak_bytes"] = checked_mul(c.sim.peak_bytes[2], k, "NVMe bytes");
  j["nvme"] = nvme_json(c.sim.peak_bytes[2], run_nvme_reservation(c.graph, c.plan));
  j["budget"] = a.budget;
  j["lower_bound_s"] = a.bound.seconds;
  j["lower_bound_why"] = a.bound.why;
  j["lower_bound_terms_s"] = {{"compute", a.bound.compute},
                              {"transfer", a.bound.transfer},
                              {"forward", a.bound.forward},
                              {"cpu", a.bound.cpu},
                              {"nvme_write", a.bound.nvme_write}};
  j["compute_time_s"] = c.sim.compute_time;
  j["host_compute_time_s"] = c.sim.host_compute_time;
  j["comm_time_s"] = c.sim.comm_time;
  j["transfer_stall_s"] = c.sim.transfer_stall_time;
  j["recomputed_ops"] = f.recomputed_ops;
  j["swapped_activations"] = f.swapped;
  j["swapped_bytes"] = f.swapped_bytes;
  j["offloaded_host_bytes"] = f.offloaded[1];
  j["offloaded_nvme_bytes"] = f.offloaded[2];
  j["bytes_moved"] = {{"h2d", c.sim.bytes_moved[static_cast<size_t>(Resource::kH2D)]},
                      {"d2h", c.sim.bytes_moved[static_cast<size_t>(Resource::kD2H)]},
                      {"nvme_read", c.sim.bytes_moved[static_cast<size_t>(Resource::kNvmeRead)]},
                      {"nvme_write", c.sim.bytes_moved[static_cast<size_t>(Resource::kNvmeWrite)]},
                      {"collectives", c.sim.bytes_moved[static_cast<size_t>(Resource::kComm)]}};
  j["solve_seconds"] = a.solve_seconds;
  j["skipped_configurations"] = nlohmann::json::array();
  for (const SkippedConfig& skip : a.skipped) {
    j["skipped_configurations"].push_back({{"configuration", skip.config.name()},
                                           {"zero_stage", skip.config.stage},
                                           {"optimizer_on", to_string(skip.config.optimizer)},
                                           {"params_on", to_string(skip.config.params)},
                                           {"why", skip.why}});
  }
  j["singles"] = nlohmann::json::array();
  for (const Candidate& s : a.singles) j["singles"].push_back(candidate_json(s));
  return j;
}

// One stderr line per plan a capacity search tries (stdout stays the result).
void report_try(const CapacityTry& t) {
  std::string verdict;
  if (t.plans) {
    verdict = fmt::format("plans, {} per iteration, {:.4g} samples/s per rank",
                          human_seconds(t.iteration_time), t.samples_per_s);
  } else {
    verdict = "no plan: " + (t.why.size() > 150 ? t.why.substr(0, 147) + "..." : t.why);
  }
  std::cerr << fmt::format("memwall: {} batch {}: {} ({} to plan)\n", t.model, t.batch, verdict,
                           human_seconds(t.seconds));
}

CapacityOptions capacity_options(const PlanArgs& args) {
  CapacityOptions o;
  o.largest = args.largest;
  if (args.search_time) {
    if (!(*args.search_time > 0) || *args.search_time > 86400 * 7) {
      fail("--search-time must be a number of seconds in (0, 604800] (got {})", *args.search_time);
    }
    o.time_limit = *args.search_time;
  }
  o.progress = report_try;
  return o;
}

nlohmann::json tried_json(const std::vector<CapacityTry>& tried) {
  nlohmann::json all = nlohmann::json::array();
  for (const CapacityTry& t : tried) {
    nlohmann::json j = {
        {"model", t.model}, {"batch", t.batch}, {"plans", t.plans}, {"seconds", t.seconds}};
    if (t.plans) {
      j["iteration_time_s"] = t.iteration_time;
      j["samples_per_s_per_rank"] = t.samples_per_s;
    } else {
      j["why"] = t.why;
    }
    all.push_back(j);
  }
  return all;
}

}  // namespace

Hardware load_node(const PlanArgs& args) {
  Hardware hw = args.gpu.load();
  if (args.gpus_per_node) hw.gpus_per_node = parse_gpus_per_node(*args.gpus_per_node);
  return hw;
}

int run_auto_plan(const PlanArgs& args) {
  OutputFiles outputs;
  outputs.declare(args.out);
  outputs.declare(args.out_graph);
  args.exports.declare(outputs);
  const Hardware hw = load_node(args);
  if (args.strategy != "auto") {
    bool known = false;
    for (const std::string_view name : single_technique_names()) known |= name == args.strategy;
    if (!known || args.strategy == "remat") {
      fail(
          "unknown strategy '{}' (known: auto, vdnn, capuchin, zero-offload, zero-infinity, "
          "patrickstar, remat, remat:NAME)",
          args.strategy);
    }
    if (args.max_batch || !args.max_model.empty()) {
      fail("--max-batch and --max-model search with the automatic planner (--strategy auto)");
    }
  }
  if (args.max_batch && !args.max_model.empty())
    fail("--max-batch and --max-model exclude each other");
  const bool searching = args.max_batch || !args.max_model.empty();
  // Searches build their models as they go (Note [Batch search]).
  const std::optional<Graph> loaded =
      searching ? std::nullopt : std::optional<Graph>(args.source.load(hw));
  const PlannerOptions options = planner_options(args, hw, loaded ? &*loaded : nullptr);

  if (!args.max_model.empty()) {
    ModelOptions base = args.source.model_options(hw);
    const MaxModel m = max_model(args.max_model, base, hw, options, capacity_options(args));
    base.batch = m.tried.back().batch;
    const Graph graph = build_model(m.model, base);
    const Written written = write_outputs(outputs, args, graph, m.plan.best, hw);
    if (args.json) {
      nlohmann::json j = plan_json(graph, m.plan, hw, options.ranks);
      j["layout"] = written.layout;
      j["max_model"] = m.model;
      j["tried"] = tried_json(m.tried);
      j["search_seconds"] = m.seconds;
      std::cout << j.dump(2) << "\n";
      return 0;
    }
    std::cout << fmt::format("largest '{}' model that trains on {}: {}\n", args.max_model, hw.name,
                             m.model);
    for (const CapacityTry& t : m.tried) std::cout << field(t.model, t.plans ? "plans" : t.why);
    std::cout << "\n";
    print_plan(args, graph, m.plan, hw, options.ranks, written);
    return 0;
  }
  if (args.max_batch) {
    const ModelOptions base = args.source.model_options(hw);
    if (args.source.batch) fail("--max-batch searches the batch: leave out --batch");
    const MaxBatch b = max_batch(args.source.model, base, hw, options, capacity_options(args));
    ModelOptions at = base;
    at.batch = b.batch;
    const Graph graph = build_model(args.source.model, at);
    const Written written = write_outputs(outputs, args, graph, b.plan.best, hw);
    if (args.json) {
      nlohmann::json j = plan_json(graph, b.plan, hw, options.ranks);
      j["layout"] = written.layout;
      j["max_batch"] = b.batch;
      j["goal"] = args.largest ? "largest" : "throughput";
      j["first_failing_batch"] = b.first_failing;
      j["why_not_larger"] = b.why;
      j["plans_tried"] = b.tried.size();
      j["tried"] = tried_json(b.tried);
      j["search_stopped"] = b.stopped;
      j["cut_short"] = b.cut_short;
      j["search_seconds"] = b.seconds;
      std::cout << j.dump(2) << "\n";
      return 0;
    }
    std::cout << fmt::format("{} batch of {} that trains on {}: {}\n",
                             args.largest ? "largest" : "fastest", args.source.model, hw.name,
                             b.batch);
    std::cout << field("search", fmt::format("{} ({} plans in {})", b.stopped, b.tried.size(),
                                             human_seconds(b.seconds)));
    if (b.first_failing > 0) {
      std::cout << field(fmt::format("batch {}", b.first_failing), b.why);
    }
    std::cout << "\n";
    print_plan(args, graph, b.plan, hw, options.ranks, written);
    return 0;
  }

  const Graph& graph = *loaded;
  // A single technique's plan for `budget`, with the hardware and budget it
  // ran on.
  const auto technique_for = [&](uint64_t budget) {
    AutoPlan t;
    PlannerOptions with_budget = options;
    with_budget.budget = budget;
    t.hardware = hw;
    if (options.host_bytes > 0) t.hardware.host_memory_bytes = options.host_bytes;
    t.budget = budget;
    t.best = plan_single_technique(graph, hw, with_budget, args.strategy);
    return t;
  };
  AutoPlan a;
  if (args.strategy == "auto") {
    a = plan_auto(graph, hw, options);
  } else {
    // One technique: its plan, or why it does not fit (exit code 2).
    PlannerOptions with_budget = options;
    with_budget.budget = options.budget > 0 ? options.budget : default_budget(hw);
    const Deadline deadline = Deadline::in(with_budget.time_limit);
    a = technique_for(with_budget.budget);
    a.bound = iteration_lower_bound(graph, a.hardware, with_budget);
    if (!a.best.fits) fail("{} does not fit: {}", args.strategy, a.best.why);
    // The table shares the time limit (Note [Time limits are wall time]).
    with_budget.time_limit = std::max(deadline.left(), 1e-9);
    a.singles = single_techniques(graph, hw, with_budget);
    a.solve_seconds = a.best.solve_seconds;
  }
  std::optional<RunnablePlan> runnable;
  uint64_t planned_for = 0;
  if (!args.out.empty()) {
    runnable = make_runnable(
        a, args,
        [&](uint64_t budget) {
          if (args.strategy != "auto") return technique_for(budget);
          PlannerOptions lowered = options;
          lowered.budget = budget;
          return plan_auto(graph, hw, lowered);
        },
        planned_for);
  }
  Written written =
      write_outputs(outputs, args, graph, a.best, a.hardware, runnable ? &*runnable : nullptr);
  if (planned_for > 0) {
    written.rows.insert(written.rows.begin(), field("planned for", planned_for_text(planned_for)));
  }
  if (args.json) {
    nlohmann::json j = plan_json(graph, a, a.hardware, options.ranks);
    j["layout"] = written.layout;
    if (planned_for > 0) j["planned_for_bytes"] = planned_for;
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  print_plan(args, graph, a, a.hardware, options.ranks, written);
  return 0;
}

}  // namespace memwall::cli
