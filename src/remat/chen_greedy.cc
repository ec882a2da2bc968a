// chen-greedy: Chen et al. 2016, sec. 4.2 ("Algorithm 3: memory planning
// with budget"): walk the forward accumulating the bytes each op saves for
// backward; at a candidate splitting point whose running total exceeds a
// threshold b, keep it and restart the count. A small b keeps many
// checkpoints (short segments), a large b few (long segments); the paper
// searches b for the plan of least memory.
//
// Budget-driven, as the issue asks: the search tries a geometric grid of
// thresholds (plus b = 0 and b = everything), simulates each distinct plan,
// and returns the fitting one with the shortest simulated iteration (ties:
// the lower peak). When none fits, the error names the lowest peak found.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/sim/simulator.h"
#include "planner_common.h"

namespace memwall {
namespace {

constexpr int kGridPoints = 24;

// The paper's greedy pass for threshold b: which candidates become checkpoints.
std::vector<uint8_t> greedy_keep(const Graph& graph, std::span<const uint8_t> droppable,
                                 std::span<const uint8_t> is_candidate, double threshold) {
  std::vector<uint8_t> keep(graph.buffers.size(), 0);
  double running = 0;
  for (const Op& op : graph.ops) {
    if (op.phase != Phase::kForward) continue;
    for (const BufferId b : op.out) {
      if (droppable[b]) running += static_cast<double>(graph.buffers[b].bytes);
    }
    for (const BufferId b : op.out) {
      if (is_candidate[b] && running > threshold) {
        keep[b] = 1;
        running = 0;
      }
    }
  }
  return keep;
}

}  // namespace

using remat_detail::ChenGreedyPlan;

std::vector<ChenGreedyPlan> remat_detail::chen_greedy_plans(const Graph& graph,
                                                            const Hardware& hardware) {
  const std::vector<uint8_t> droppable = droppable_activations(graph);
  std::vector<uint8_t> is_candidate(graph.buffers.size(), 0);
  for (const BufferId b : candidate_checkpoints(graph)) is_candidate[b] = 1;

  double total = 0;
  double smallest = std::numeric_limits<double>::infinity();
  for (const Buffer& b : graph.buffers) {
    if (!droppable[b.id]) continue;
    total += static_cast<double>(b.bytes);
    if (b.bytes > 0) smallest = std::min(smallest, static_cast<double>(b.bytes));
  }
  std::vector<double> thresholds = {0.0};
  if (total > 0) {
    const double low = std::min(smallest, total);
    for (int i = 0; i < kGridPoints; ++i) {
      thresholds.push_back(low * std::pow(total / low, i / double(kGridPoints - 1)));
    }
  }
  thresholds.push_back(total);  // no checkpoint: everything recomputed from the inputs

  std::vector<ChenGreedyPlan> plans;
  std::vector<std::vector<uint8_t>> tried;
  for (const double threshold : thresholds) {
    std::vector<uint8_t> keep = greedy_keep(graph, droppable, is_candidate, threshold);
    if (std::find(tried.begin(), tried.end(), keep) != tried.end()) continue;
    ChenGreedyPlan p;
    p.plan = remat_detail::checkpoint_plan(graph, hardware, kMaxBytes, keep);
    const SimResult sim = simulate(graph, p.plan, hardware, {.record_curves = false});
    p.checkpoints = static_cast<size_t>(std::count(keep.begin(), keep.end(), uint8_t{1}));
    tried.push_back(std::move(keep));
    if (!sim.valid) continue;
    p.threshold = threshold;
    p.time = sim.iteration_time;
    p.peak = device_peak(sim);
    plans.push_back(std::move(p));
  }
  return plans;
}

RematResult plan_chen_greedy(const Graph& graph, const Hardware& hardware, uint64_t budget,
                             const RematOptions& /*options*/) {
  const remat_detail::Stopwatch clock;
  // Every threshold drops what lies between checkpoints, so none of them is
  // keep-all: at budgets the default schedule fits, it is the answer.
  if (auto fits =
          remat_detail::keep_all_if_it_fits(graph, hardware, budget, "chen-greedy", clock)) {
    return *std::move(fits);
  }
  std::vector<ChenGreedyPlan> plans = remat_detail::chen_greedy_plans(graph, hardware);
  const ChenGreedyPlan* best = nullptr;
  uint64_t lowest_peak = std::numeric_limits<uint64_t>::max();
  for (const ChenGreedyPlan& p : plans) {
    lowest_peak = std::min(lowest_peak, p.peak);
    if (p.peak > budget) continue;
    if (best == nullptr || p.time < best->time || (p.time == best->time && p.peak < best->peak)) {
      best = &p;
    }
  }
  if (best == nullptr) {
    fail("chen-greedy: no threshold fits the budget of {} bytes; the lowest peak it reaches is {}",
         budget, lowest_peak);
  }
  std::string note = fmt::format("threshold {:.0f} bytes: {} checkpoints ({} thresholds tried)",
                                 best->threshold, best->checkpoints, plans.size());
  Plan plan = best->plan;
  plan.budget = budget;
  return remat_detail::finish(graph, hardware, budget, std::move(plan), "chen-greedy",
                              std::move(note), clock);
}

}  // namespace memwall
