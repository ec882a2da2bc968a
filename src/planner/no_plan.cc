// When no plan fits (config_work.h).
//
// Note [What ran out]
// ~~~~~~~~~~~~~~~~~~~
// A search that finds no plan has tried many ways to run the iteration,
// and each ran out of something else: device memory (the lowest peak its
// activation planner reached or proved necessary, over the budget), host
// memory (a rank's share of the node's) or NVMe (the node's --nvme). The
// error used to name one of them, the configuration that keeps the least
// on the device; that one often fails furthest off (all on NVMe, 4x over
// a small --nvme) while another misses by a few percent, and that one is
// what a user changes an option for (issue 45). So every failure carries
// what ran out as numbers (Shortfall: BudgetError's lowest peak, the
// simulated peaks), the failures are ranked by need over limit, and the
// closest of each family of configurations (ZeRO stage and where the
// optimizer and the parameters live) is reported: the first on the error
// line, the next two as notes. Failures without numbers (a time limit, a
// planner that cannot plan the graph) rank last. Memories are compared by
// their ratios alone: 10% over the host is as close as 10% over the
// budget.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "config_work.h"
#include "memwall/base/error.h"

namespace memwall {

double Shortfall::ratio() const {
  if (limit == 0) return std::numeric_limits<double>::infinity();
  return static_cast<double>(need) / static_cast<double>(limit);
}

}  // namespace memwall

namespace memwall::planner_detail {

Misfit node_misfit(const SimResult& sim, const Graph& graph, const Hardware& hardware,
                   const PlannerOptions& options) {
  if (!sim.valid) {
    Misfit m{sim.reason, {}};
    const uint64_t share = rank_share(hardware, graph_gpus(graph)).host_memory_bytes;
    const uint64_t host = sim.peak_bytes[static_cast<size_t>(Tier::kHost)];
    // The simulator names where the host first overflows; how far off the
    // plan is shows in its peak.
    if (share > 0 && host > share) {
      m.short_of = {Tier::kHost, host, share};
      m.why += fmt::format(" (a peak of {} bytes, {:.2f}x)", host, m.short_of.ratio());
    }
    return m;
  }
  if (options.nvme_bytes == 0) return {};
  const uint64_t rank = sim.peak_bytes[static_cast<size_t>(Tier::kNvme)];
  const int k = ranks_per_node(hardware, graph_gpus(graph));
  const uint64_t node = checked_mul(rank, static_cast<uint64_t>(k), "the node's NVMe use");
  if (node <= options.nvme_bytes) return {};
  const Shortfall nvme{Tier::kNvme, node, options.nvme_bytes};
  if (k == 1) {
    return {fmt::format("NVMe use exceeds its {} bytes by {} bytes", options.nvme_bytes,
                        node - options.nvme_bytes),
            nvme};
  }
  return {fmt::format(
              "NVMe use of the node's {} ranks ({} x {} bytes) exceeds its {} bytes by {} bytes", k,
              k, rank, options.nvme_bytes, node - options.nvme_bytes),
          nvme};
}

Failure failure_of(const Candidate& c) { return {c.states, c.activations, c.why, c.short_of}; }

void fail_no_plan(const std::string& head_alone, const std::vector<SkippedConfig>& skipped,
                  std::vector<Failure> failures) {
  std::string head = head_alone;
  if (!skipped.empty()) {
    head += fmt::format(" ({} configurations skipped: {})", skipped.size(), skipped.front().why);
  }
  if (failures.empty()) fail("{}", head);
  std::stable_sort(failures.begin(), failures.end(), [](const Failure& a, const Failure& b) {
    return a.short_of.ratio() < b.short_of.ratio();
  });
  std::set<std::string> configs;
  for (const Failure& f : failures) configs.insert(f.config.name());
  // The closest of each family, closest first; a reason already shown
  // (every configuration stopped by the same op) is not repeated.
  std::set<std::tuple<int, Tier, Tier, bool>> families;
  std::set<std::string> reasons;
  std::vector<const Failure*> shown;
  for (const Failure& f : failures) {
    const StateConfig& c = f.config;
    if (!families.insert({c.stage, c.optimizer, c.params, c.paged}).second) continue;
    if (!reasons.insert(f.why).second) continue;
    shown.push_back(&f);
    if (shown.size() == 3) break;
  }
  const auto way = [](const Failure& f) {
    return fmt::format("{} ({}): {}", f.config.name(), f.activations, f.why);
  };
  std::vector<std::string> notes;
  for (size_t i = 1; i < shown.size(); ++i) notes.push_back("next closest: " + way(*shown[i]));
  throw Error(fmt::format("{}; of the {} configurations found not to fit, the closest is {}", head,
                          configs.size(), way(*shown.front())),
              std::move(notes));
}

}  // namespace memwall::planner_detail
