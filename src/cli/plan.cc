// `memwall plan`: a plan for a device budget. The default strategy, `auto`,
// is the automatic planner (plan_auto.cc); `remat` and `remat:NAME` run the
// rematerialization planners alone (this file). The plan is re-simulated
// and every figure printed comes from the simulator. Exit code 0: a plan (written with --out); 1:
// the planner returned a plan the simulator rejects (a planner bug, nothing is written); 2: bad
// input, or no plan within the budget (the message gives the lowest budget memwall's planner
// reaches, or the proven bound the budget is under: Note [Floor search] in src/remat/memwall.cc).
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "memwall/base/error.h"
#include "memwall/exec/nvme_space.h"
#include "memwall/graph/graph.h"
#include "memwall/planner/budget.h"
#include "memwall/planner/plan_to_run.h"
#include "memwall/planner/remat_summary.h"
#include "memwall/remat/checkpoints.h"
#include "memwall/remat/remat.h"
#include "memwall/report/exports.h"
#include "memwall/report/format.h"
#include "memwall/report/plan_figures.h"
#include "options.h"
#include "plan_args.h"

namespace memwall::cli {
namespace {

// The summary of a rematerialization planner's plan (memwall/planner/
// remat_summary.h), with what this command wrote, or --json.
int print_remat_plan(const PlanArgs& args, const Graph& graph, const Hardware& hw,
                     const RematPlanner& planner, const RematRun& run, const SimResult& keep_all,
                     uint64_t budget, const RunnablePlan* written, uint64_t planned_for) {
  if (args.json) {
    nlohmann::json j = remat_plan_json(graph, hw, args.strategy, run, keep_all, budget);
    j["out"] = args.out.empty() ? nlohmann::json(nullptr) : nlohmann::json(args.out);
    j["layout"] = written ? written->json() : nlohmann::json(nullptr);
    if (planned_for > 0) j["planned_for_bytes"] = planned_for;
    j["out_graph"] =
        args.out_graph.empty() ? nlohmann::json(nullptr) : nlohmann::json(args.out_graph);
    j["trace"] = args.exports.trace_file.empty() ? nlohmann::json(nullptr)
                                                 : nlohmann::json(args.exports.trace_file);
    j["svg"] = args.exports.svg_file.empty() ? nlohmann::json(nullptr)
                                             : nlohmann::json(args.exports.svg_file);
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << remat_plan_text(graph, hw, planner, run, keep_all, budget);
  if (!args.out_graph.empty()) std::cout << field("graph written to", args.out_graph);
  if (planned_for > 0) std::cout << field("planned for", planned_for_text(planned_for));
  if (written) std::cout << field("laid out", written->row_text());
  if (!args.out.empty()) std::cout << field("plan written to", args.out);
  std::cout << args.exports.written_rows();
  return 0;
}

int run_remat_plan(const PlanArgs& args) {
  const RematPlanner& planner = remat_strategy(args.strategy);
  const RematOptions options{.time_limit = checked_time_limit(args.time_limit)};
  OutputFiles outputs;
  outputs.declare(args.out);
  outputs.declare(args.out_graph);
  args.exports.declare(outputs);
  const Hardware hw = load_node(args);
  const Graph graph = args.source.load(hw);
  const SimResult keep_all = keep_all_simulation(graph, hw);
  const uint64_t keep_all_peak = device_peak(keep_all);
  const uint64_t budget = args.budget.empty()
                              ? hw.device_memory_bytes
                              : parse_budget(args.budget, hw, [&] { return keep_all_peak; });
  if (budget > hw.device_memory_bytes) {
    fail("--budget {} is {} bytes, more than the GPU's {} bytes", args.budget, budget,
         hw.device_memory_bytes);
  }
  RematRun run = run_remat(graph, hw, planner, budget, options, args.exports.sim_options());
  if (run.rejected) {
    std::cerr << fmt::format("memwall: error: internal error: {}\n", run.error);
    return 1;
  }
  if (!run.feasible) fail_no_remat_plan(graph, hw, run, options);

  // The graph is not rewritten; --out-graph writes it as the plan runs it.
  if (!args.out_graph.empty()) outputs.set(args.out_graph, graph_text_for(hw, graph));
  // Note [Plans that run]: laid out (Note [Plans laid out by default]) or
  // held by the stitching allocator, else planned for less, else refused.
  std::optional<RunnablePlan> written;
  uint64_t planned_for = 0;
  if (!args.out.empty()) {
    written =
        make_remat_plan_run(run, graph, hw, planner, budget, options, args.exports.sim_options(),
                            args.strategy, !args.no_layout, planned_for);
    outputs.set(args.out, plan_text_for(written->plan, graph));
  }
  const Plan& plan = run.result.plan;
  args.exports.write(outputs, graph, plan, hw, run.sim);
  outputs.commit();
  return print_remat_plan(args, graph, hw, planner, run, keep_all, budget,
                          written ? &*written : nullptr, planned_for);
}

bool is_remat(const PlanArgs& args) { return is_remat_strategy(args.strategy); }

int run_plan(const PlanArgs& args) {
  if (args.gpus || args.nodes || args.global_batch) return run_layout_search(args);
  if (is_pipeline(args)) return run_pipeline_plan(args);
  refuse_ignored_options(args);
  return is_remat(args) ? run_remat_plan(args) : run_auto_plan(args);
}

}  // namespace

void refuse_ignored_options(const PlanArgs& args) {
  const bool searching = args.max_batch || !args.max_model.empty();
  if (is_remat(args)) {
    if (searching) {
      fail("--max-batch and --max-model search with the automatic planner (--strategy auto)");
    }
    const char* offload = args.ranks                  ? "--ranks"
                          : args.gpus_per_node        ? "--gpus-per-node"
                          : args.zero_stage           ? "--zero-stage"
                          : !args.host_memory.empty() ? "--host-memory"
                          : !args.nvme.empty()        ? "--nvme"
                                                      : nullptr;
    if (offload != nullptr) {
      fail(
          "{} does not apply to --strategy {}: rematerialization keeps every model state on one "
          "GPU (ranks, ZeRO, host memory and NVMe are for --strategy auto and the single "
          "techniques)",
          offload, args.strategy);
    }
  }
  if (args.zero_stage && *args.zero_stage > 0 && *args.zero_stage <= 3 &&
      (!args.ranks || parse_count(*args.ranks, "--ranks") == 1)) {
    fail(
        "--zero-stage {} shards model states across data-parallel ranks: give --ranks 2 or more "
        "(with one rank only stage 0 exists)",
        *args.zero_stage);
  }
  if (!args.checkpointing.empty() && (args.strategy == "auto" || is_remat(args))) {
    fail(
        "--checkpointing applies to the single techniques that move model states (zero, "
        "zero-offload, zero-infinity, patrickstar, paged), not to --strategy {}",
        args.strategy);
  }
  if (args.largest && !args.max_batch) fail("--largest applies to --max-batch");
  if (args.no_layout && args.out.empty()) fail("--no-layout applies to --out");
  if (args.search_time && !searching) fail("--search-time applies to --max-batch and --max-model");
  if (!args.max_model.empty()) {
    if (args.model_given) fail("--max-model chooses the model: leave out --model");
    if (!args.source.graph_file.empty()) fail("--max-model searches the zoo: leave out --graph");
  }
  if (args.max_batch && !args.source.graph_file.empty()) {
    fail("--max-batch searches the batch of a zoo model (--model), not of --graph");
  }
}

void add_plan(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand(
      "plan", "how to train it here: where model states live, what to recompute or swap");
  auto args = std::make_shared<PlanArgs>();
  args->source.add_options(*cmd, "gpt2-small");
  args->gpu.add_options(*cmd, "a100-80g");
  cmd->add_option(
      "--budget", args->budget,
      fmt::format("device budget: {}. Default: the GPU's memory less the framework reserve; "
                  "remat strategies: the GPU's memory",
                  kBudgetForms));
  cmd->add_option("--strategy", args->strategy,
                  "auto (memwall's planner), a single technique (vdnn, capuchin, zero-offload, "
                  "zero-infinity, patrickstar, paged; zero: ZeRO or FSDP with every state on the "
                  "device), remat (memwall's rematerialization alone) or remat:NAME")
      ->capture_default_str();
  cmd->add_option("--checkpointing", args->checkpointing,
                  "the rematerialization planner (per-layer, selective, ...; see `memwall bench "
                  "remat`) that a single technique moving model states runs its activations "
                  "with, as the published systems ran them (default: the technique's own); with "
                  "--pipeline-parallel or --gpus: per-layer, selective or keep-all (default: keep-all; the "
                  "layout search recomputes where keeping does not fit)");
  cmd->add_option("--ranks", args->ranks, "data-parallel GPUs sharing model states (ZeRO)");
  cmd->add_option("--gpus-per-node", args->gpus_per_node,
                  "GPUs sharing one host's memory, PCIe, NVMe and CPU (default: the profile's)");
  cmd->add_option("--zero-stage", args->zero_stage, "only this ZeRO stage (0-3; default: search)");
  cmd->add_option("--host-memory", args->host_memory,
                  "host memory for offloading (default: the profile's)");
  cmd->add_option("--nvme", args->nvme,
                  "NVMe capacity for offloading, or none: nothing goes to NVMe (zero-infinity "
                  "then offloads to the CPU only; default: unlimited)");
  cmd->add_flag("--max-batch", args->max_batch,
                "find the batch of --model with the highest throughput that trains within the "
                "budget (one progress line per batch on stderr)");
  cmd->add_flag("--largest", args->largest,
                "with --max-batch: the largest batch that trains, however slow");
  cmd->add_option("--max-model", args->max_model,
                  "find the largest zoo model whose name starts with FAMILY that trains here");
  cmd->add_option("--search-time", args->search_time,
                  "seconds --max-batch / --max-model may search, checked before each plan; when "
                  "they run out, the best so far (default: 300)");
  cmd->add_option("--time-limit", args->time_limit,
                  "wall seconds the planner may take; it returns within them plus a margin "
                  "(docs/planner.md)")
      ->capture_default_str();
  cmd->add_option("--out", args->out,
                  "write the plan (memwall.plan/1 JSON), laid out: every device buffer and "
                  "workspace at an offset in an arena of the budget");
  cmd->add_flag("--no-layout", args->no_layout,
                "write the plan without offsets (it then runs on the stitching allocator)");
  cmd->add_option("--out-graph", args->out_graph,
                  "write the graph the plan runs (ZeRO and offload rewrite it; default with "
                  "--out: next to the plan, when rewritten)");
  cmd->add_option("--pipeline-parallel", args->pipeline_parallel,
                  "pipeline parallelism over N devices: the graph (one micro-batch, --batch) cut "
                  "into stages and one step simulated (docs/pipeline.md)");
  cmd->add_option("--micro-batches", args->micro_batches,
                  "with --pipeline-parallel: micro-batches a step (default: the devices)");
  cmd->add_option("--schedule", args->schedule,
                  "with --pipeline-parallel: gpipe, 1f1b, interleaved or hanayo (default: 1f1b; "
                  "interleaved with --chunks-per-device above 1)");
  cmd->add_option("--chunks-per-device", args->chunks_per_device,
                  "with --pipeline-parallel: model chunks a device runs (interleaved, hanayo)");
  cmd->add_option("--partition", args->partition,
                  "with --pipeline-parallel: tarnawski (the dynamic programme, default), even "
                  "(Megatron-LM's even split of the layers) or ip (Tarnawski et al.'s integer "
                  "programme: non-contiguous placement, solved by CBC within --time-limit)");
  cmd->add_option("--torchrun", args->torchrun,
                  "with --pipeline-parallel (GPT-2 and Llama): write DIR/layout.json and "
                  "DIR/torchrun.sh, which trains the plan's layout under PyTorch's DTensor and "
                  "pipelining (docs/torch-layout.md)");
  cmd->add_option("--gpus", args->gpus,
                  "search the layout of N GPUs: data x tensor x context x pipeline parallelism, "
                  "the micro-batch, the schedule, recomputation and ZeRO per stage, each "
                  "simulated (docs/pipeline.md)");
  cmd->add_option("--nodes", args->nodes,
                  "with --global-batch: search the layout of M nodes of --gpus-per-node GPUs "
                  "(the profile's by default), M x G GPUs; with --gpus, they must agree");
  cmd->add_option("--global-batch", args->global_batch,
                  "with --gpus: samples a step over all data-parallel replicas");
  add_export_options(*cmd, args->exports);
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->callback([&action, args, cmd] {
    args->model_given = cmd->count("--model") > 0;
    action = [args] { return run_plan(*args); };
  });
}

}  // namespace memwall::cli
