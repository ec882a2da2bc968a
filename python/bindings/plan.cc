// memwall.plan's C++ half: a traced graph planned for a budget on a GPU
// profile, laid out and checked to run where `memwall run` runs it
// (memwall/planner/plan_to_run.h), with `memwall plan`'s table and JSON
// (memwall/planner/plan_summary.h); and a plan simulated again, with
// `memwall simulate`'s (memwall/report/simulation.h).
#include <string>

#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include "bindings.h"
#include "memwall/base/error.h"
#include "memwall/base/parse_values.h"
#include "memwall/exec/nvme_space.h"
#include "memwall/graph/graph.h"
#include "memwall/plan/plan.h"
#include "memwall/planner/budget.h"
#include "memwall/planner/model_source.h"
#include "memwall/planner/plan_summary.h"
#include "memwall/planner/plan_to_run.h"
#include "memwall/planner/remat_summary.h"
#include "memwall/remat/runner.h"
#include "memwall/report/format.h"
#include "memwall/report/simulation.h"

namespace memwall::python {
namespace {

struct PlanMade {
  std::string plan_text;   // the plan file (memwall.plan/1), laid out when it is
  std::string graph_text;  // the graph it plans: a ZeRO or offload rewrite of the input
  std::string table;       // `memwall plan`'s table
  std::string json;        // `memwall plan --json`'s object
};

// `memwall plan --strategy remat[:NAME] --out`: one rematerialization
// planner alone, every model state on the device (the graph as traced).
PlanMade make_remat_plan(const Graph& graph, const Hardware& hw, const std::string& budget_text,
                         const std::string& strategy, double time_limit, bool lay_out) {
  const RematPlanner& planner = remat_strategy(strategy);
  const RematOptions options{.time_limit = checked_time_limit(time_limit)};
  const SimResult keep_all = keep_all_simulation(graph, hw);
  const uint64_t budget =
      budget_text.empty() ? hw.device_memory_bytes
                          : parse_budget(budget_text, hw, [&] { return device_peak(keep_all); });
  check_budget_within_device(budget, hw);
  RematRun run = run_remat(graph, hw, planner, budget, options, SimOptions{});
  if (run.rejected) fail("internal error: {}", run.error);
  if (!run.feasible) fail_no_remat_plan(graph, hw, run, options);
  uint64_t planned_for = 0;
  const RunnablePlan runs = make_remat_plan_run(run, graph, hw, planner, budget, options,
                                                SimOptions{}, strategy, lay_out, planned_for);
  PlanMade out;
  out.plan_text = plan_text_for(runs.plan, graph);
  out.graph_text = graph_text_for(hw, graph);
  out.table = remat_plan_text(graph, hw, planner, run, keep_all, budget);
  if (planned_for > 0) out.table += field("planned for", planned_for_text(planned_for));
  out.table += field("laid out", runs.row_text());
  nlohmann::json j = remat_plan_json(graph, hw, strategy, run, keep_all, budget);
  j["layout"] = runs.json();
  if (planned_for > 0) j["planned_for_bytes"] = planned_for;
  out.json = j.dump();
  return out;
}

PlanMade make_plan(const std::string& graph_json, const std::string& gpu,
                   const std::string& gpu_file, const std::string& budget,
                   const std::string& strategy, double time_limit, bool lay_out, int ranks,
                   int zero_stage) {
  const Hardware hw = hardware_named(gpu, gpu_file);
  const Graph graph = graph_for(graph_json, hw);
  if (is_remat_strategy(strategy)) {
    if (ranks > 1)
      fail("strategy {} plans one rank; with {} ranks plan with auto", strategy, ranks);
    return make_remat_plan(graph, hw, budget, strategy, time_limit, lay_out);
  }
  if (ranks < 1) fail("ranks must be at least 1 (got {})", ranks);
  PlannerOptions options;
  options.ranks = ranks;
  if (zero_stage >= 0) options.zero_stage = zero_stage;
  options.time_limit = checked_time_limit(time_limit);
  if (!budget.empty()) {
    options.budget = parse_budget(budget, hw, [&] { return keep_all_peak(graph, hw); });
    check_budget_within_device(options.budget, hw);
  }
  AutoPlanToRun made = plan_auto_to_run(graph, hw, options, strategy, lay_out);
  const Candidate& best = made.plan.best;
  const NvmeReservation nvme = exec::run_nvme_reservation(best.graph, best.plan);
  PlanMade out;
  out.plan_text = plan_text_for(made.runs.plan, best.graph);
  out.graph_text = graph_text_for(hw, best.graph);
  out.table = auto_plan_text(graph, made.plan, made.plan.hardware, options.ranks, strategy,
                             budget.empty(), nvme);
  if (made.planned_for > 0) out.table += field("planned for", planned_for_text(made.planned_for));
  out.table += field("laid out", made.runs.row_text());
  out.table += "\nthe same work under each single technique:\n" + technique_table(made.plan);
  nlohmann::json j = auto_plan_json(graph, made.plan, made.plan.hardware, options.ranks, nvme);
  j["layout"] = made.runs.json();
  if (made.planned_for > 0) j["planned_for_bytes"] = made.planned_for;
  out.json = j.dump();
  return out;
}

// (JSON, table) of `memwall simulate` for a plan of a graph on a profile.
std::pair<std::string, std::string> simulate_plan(const std::string& graph_json,
                                                  const std::string& plan_json,
                                                  const std::string& gpu,
                                                  const std::string& gpu_file) {
  const Plan plan = plan_from_json_text(plan_json);
  const Hardware hw =
      hardware_named(gpu.empty() && gpu_file.empty() ? plan.hardware : gpu, gpu_file);
  const Graph graph = graph_for(graph_json, hw);
  check_plan_graph(plan, graph);
  validate_plan(plan, graph);
  const SimResult result = simulate(graph, plan, hw);
  const SimulationReport report{graph,  plan,       hw,
                                result, "the plan", exec::run_nvme_reservation(graph, plan)};
  return {simulation_json(report).dump(), simulation_text(report)};
}

}  // namespace

void add_plan(nanobind::module_& m) {
  nanobind::class_<PlanMade>(m, "PlanMade")
      .def_ro("plan_text", &PlanMade::plan_text)
      .def_ro("graph_text", &PlanMade::graph_text)
      .def_ro("table", &PlanMade::table)
      .def_ro("json", &PlanMade::json);
  m.def("plan", &make_plan, nanobind::arg("graph_json"), nanobind::arg("gpu"),
        nanobind::arg("gpu_file") = "", nanobind::arg("budget") = "",
        nanobind::arg("strategy") = "auto", nanobind::arg("time_limit") = 10.0,
        nanobind::arg("lay_out") = true, nanobind::arg("ranks") = 1,
        nanobind::arg("zero_stage") = -1,
        "A plan that runs, for a budget (bytes, N%gpu or N%peak; \"\" for the default), "
        "as `memwall plan --out` makes it");
  m.def("simulate", &simulate_plan, nanobind::arg("graph_json"), nanobind::arg("plan_json"),
        nanobind::arg("gpu") = "", nanobind::arg("gpu_file") = "",
        "(JSON text, table) of `memwall simulate` for a plan of a graph (on the plan's own "
        "profile unless one is named)");
}

}  // namespace memwall::python
