// What `memwall plan --strategy auto` prints (plan_print.h).
#include "plan_print.h"

#include <iostream>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/report/format.h"
#include "memwall/report/plan_figures.h"
#include "plan_figures.h"

namespace memwall::cli {
namespace {

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

}  // namespace

void print_plan(const PlanArgs& args, const Graph& graph, const AutoPlan& a, const Hardware& hw,
                int ranks, const Written& written) {
  const Candidate& c = a.best;
  const SimResult& sim = c.sim;
  const PlanFacts f = plan_facts(c.graph, c.plan);
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
  const PlanFacts f = plan_facts(c.graph, c.plan);
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
