// What `memwall plan` prints of an automatic plan (plan_summary.h).
#include "memwall/planner/plan_summary.h"

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/base/human.h"
#include "memwall/report/format.h"
#include "memwall/report/plan_figures.h"

namespace memwall {
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

std::string auto_plan_text(const Graph& graph, const AutoPlan& a, const Hardware& hw, int ranks,
                           std::string_view strategy, bool default_budget,
                           const NvmeReservation& nvme) {
  std::string out;

  const Candidate& c = a.best;
  const SimResult& sim = c.sim;
  const PlanFacts f = plan_facts(c.graph, c.plan);
  // Tensor-parallel ranks share the node too (graph_gpus).
  const auto k =
      static_cast<uint64_t>(ranks_per_node(a.hardware, ranks * graph_tensor_parallel(graph)));
  const Throughput throughput = plan_throughput(graph, sim.iteration_time, hw, ranks);
  out += fmt::format("{} on {}: {}\n", graph.name, hw.name, strategy);
  if (ranks > 1) out += field("ranks", ranks_row(a.hardware, ranks));
  std::string budget = exact_bytes(a.budget);
  if (default_budget) {
    budget += fmt::format(": {} less a {} framework reserve", human_bytes(hw.device_memory_bytes),
                          human_bytes(framework_reserve(hw)));
  }
  out += field("budget", budget);
  out += field("model states", c.states.name());
  out += field("activations", c.activations);
  out += field("iteration time", human_seconds(sim.iteration_time));
  out += field("throughput", throughput_row(throughput, sim.iteration_time));
  out += field("lower bound",
               fmt::format("{} ({}); the plan is {:.2f}x of it", human_seconds(a.bound.seconds),
                           a.bound.why, sim.iteration_time / a.bound.seconds));
  out += field("time split", time_split_row(sim));
  out += field("peak device memory", fmt::format("{} at {}", exact_bytes(sim.peak_bytes[0]),
                                                 human_seconds(sim.peak_time[0])));
  if (k == 1) {
    out += field("peak host memory", fmt::format("{} of {}", human_bytes(sim.peak_bytes[1]),
                                                 human_bytes(a.hardware.host_memory_bytes)));
    if (sim.peak_bytes[2] > 0) {
      out += field("peak NVMe use", nvme_row(sim.peak_bytes[2], nvme));
    }
  } else {
    out += field(
        "peak host memory",
        fmt::format("{} of {} on the node ({} ranks x {})",
                    human_bytes(checked_mul(sim.peak_bytes[1], k, "host bytes")),
                    human_bytes(a.hardware.host_memory_bytes), k, human_bytes(sim.peak_bytes[1])));
    if (sim.peak_bytes[2] > 0) {
      out += field("peak NVMe use",
                   fmt::format("{} on the node ({} ranks x {})",
                               human_bytes(checked_mul(sim.peak_bytes[2], k, "NVMe bytes")), k,
                               nvme_row(sim.peak_bytes[2], nvme)));
    }
  }
  // Note [Host buffers of the published systems]: in the host peak above.
  if (!c.plan.host_reserved.empty()) {
    std::string held;
    for (const HostReserve& r : c.plan.host_reserved) {
      held += fmt::format("{}{} {}", held.empty() ? "" : "; ", r.what, human_bytes(r.bytes));
    }
    out += field("host buffers", fmt::format("{} per rank, held all iteration: {}",
                                             human_bytes(host_reserved_bytes(c.plan)), held));
  }
  out += field("recomputed", fmt::format("{} ops, {}", grouped(f.recomputed_ops),
                                         human_flops(f.recomputed_flops)));
  out += field("swapped activations",
               fmt::format("{} buffers, {}", grouped(f.swapped), human_bytes(f.swapped_bytes)));
  out += field("offloaded states", fmt::format("host {}, nvme {}", human_bytes(f.offloaded[1]),
                                               human_bytes(f.offloaded[2])));
  out += field("bytes over links", link_row(sim));
  out += field("solve time", fmt::format("{} ({} configurations searched)",
                                         human_seconds(a.solve_seconds), a.configs_tried));
  for (const std::string& row : skipped_rows(a)) out += row;
  return out;
}

nlohmann::json auto_plan_json(const Graph& graph, const AutoPlan& a, const Hardware& hw, int ranks,
                              const NvmeReservation& nvme) {
  const Candidate& c = a.best;
  const PlanFacts f = plan_facts(c.graph, c.plan);
  // Tensor-parallel ranks share the node too (graph_gpus).
  const auto k =
      static_cast<uint64_t>(ranks_per_node(a.hardware, ranks * graph_tensor_parallel(graph)));
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
  j["nvme"] = nvme_json(c.sim.peak_bytes[2], nvme);
  j["host_reserved"] = nlohmann::json::array();
  for (const HostReserve& r : c.plan.host_reserved) {
    j["host_reserved"].push_back({{"what", r.what}, {"bytes", r.bytes}});
  }
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

}  // namespace memwall
