// `memwall plan --strategy auto` (the default) and the single techniques:
// memwall's automatic planner (src/planner) with its summary, its gap to the
// lower bound and the side-by-side table of single techniques; and the
// capacity searches --max-batch and --max-model (Note [Batch search] in
// src/planner/capacity.cc), which report each plan they try on stderr. Every
// figure comes from the simulator. Exit code 0: a plan; 2: bad input, or
// nothing fits (the message names the resource that runs out). This file
// parses the options, calls the planner (memwall/planner/plan_to_run.h) and
// writes the files; plan_print.cc prints.
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "memwall/base/error.h"
#include "memwall/base/output_files.h"
#include "memwall/graph/graph.h"
#include "memwall/planner/budget.h"
#include "memwall/planner/plan_to_run.h"
#include "memwall/report/format.h"
#include "options.h"
#include "plan_args.h"
#include "plan_print.h"

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
  if (graph != nullptr && graph_context_parallel(*graph) > 1) {
    // Note [Context parallelism in the zoo]: the gradients are reduced (and
    // ZeRO shards) over the data-parallel and context-parallel ranks together.
    o.ranks *= graph_context_parallel(*graph);
    if (o.ranks > (1 << 20)) fail("--ranks x --context-parallel is more than 2^20 ranks");
  }
  o.zero_stage = args.zero_stage;
  o.checkpointing = args.checkpointing;
  if (!args.host_memory.empty()) {
    o.host_bytes = parse_bytes(args.host_memory, "--host-memory", hw.host_memory_bytes);
  }
  if (args.nvme == "none") {
    o.no_nvme = true;
  } else if (!args.nvme.empty()) {
    o.nvme_bytes = parse_bytes(args.nvme, "--nvme", 0);
  }
  check_budget_within_device(o.budget, hw);
  return o;
}

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
          "patrickstar, paged, zero, remat, remat:NAME)",
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
    return print_max_model(args, graph, m, hw, options.ranks, written);
  }
  if (args.max_batch) {
    const ModelOptions base = args.source.model_options(hw);
    if (args.source.batch) fail("--max-batch searches the batch: leave out --batch");
    const MaxBatch b = max_batch(args.source.model, base, hw, options, capacity_options(args));
    ModelOptions at = base;
    at.batch = b.batch;
    const Graph graph = build_model(args.source.model, at);
    const Written written = write_outputs(outputs, args, graph, b.plan.best, hw);
    return print_max_batch(args, graph, b, hw, options.ranks, written);
  }

  const Graph& graph = *loaded;
  // Note [Plans that run]: with --out, a plan that runs, planned again for
  // less when it does not (Note [Planning for the layout]).
  AutoPlan a = plan_strategy(graph, hw, options, args.strategy);
  std::optional<RunnablePlan> runnable;
  uint64_t planned_for = 0;
  if (!args.out.empty()) {
    runnable =
        make_auto_plan_run(a, graph, hw, options, args.strategy, !args.no_layout, planned_for);
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
