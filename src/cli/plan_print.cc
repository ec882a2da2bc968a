// What `memwall plan --strategy auto` prints (plan_print.h).
#include "plan_print.h"

#include <iostream>

#include <fmt/format.h>

#include "memwall/base/human.h"
#include "memwall/exec/nvme_space.h"
#include "memwall/planner/plan_summary.h"
#include "memwall/report/format.h"
#include "memwall/report/plan_figures.h"

namespace memwall::cli {

void print_plan(const PlanArgs& args, const Graph& graph, const AutoPlan& a, const Hardware& hw,
                int ranks, const Written& written) {
  std::cout << auto_plan_text(graph, a, hw, ranks, args.strategy, args.budget.empty(),
                              exec::run_nvme_reservation(a.best.graph, a.best.plan));
  for (const std::string& row : written.rows) std::cout << row;
  std::cout << args.exports.written_rows();
  std::cout << "\nthe same work under each single technique:\n" << technique_table(a);
}

nlohmann::json plan_json(const Graph& graph, const AutoPlan& a, const Hardware& hw, int ranks) {
  return auto_plan_json(graph, a, hw, ranks, exec::run_nvme_reservation(a.best.graph, a.best.plan));
}

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

int print_max_model(const PlanArgs& args, const Graph& graph, const MaxModel& m, const Hardware& hw,
                    int ranks, const Written& written) {
  if (args.json) {
    nlohmann::json j = plan_json(graph, m.plan, hw, ranks);
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
  print_plan(args, graph, m.plan, hw, ranks, written);
  return 0;
}

int print_max_batch(const PlanArgs& args, const Graph& graph, const MaxBatch& b, const Hardware& hw,
                    int ranks, const Written& written) {
  if (args.json) {
    nlohmann::json j = plan_json(graph, b.plan, hw, ranks);
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
  print_plan(args, graph, b.plan, hw, ranks, written);
  return 0;
}

}  // namespace memwall::cli
