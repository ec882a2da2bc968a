#include "memwall/cli/plan_layout.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "memwall/graph/error.h"

namespace memwall {

LayoutProblem plan_layout_problem(const Graph& graph, std::span<const Residency> residencies,
                                  uint64_t capacity) {
  constexpr auto kNone = std::numeric_limits<uint64_t>::max();
  std::vector<uint64_t> first(graph.buffers.size(), kNone), last(graph.buffers.size(), 0);
  for (const Residency& r : residencies) {
    if (r.buf < 0 || static_cast<size_t>(r.buf) >= graph.buffers.size()) {
      fail("residency of unknown buffer {}", r.buf);
    }
    first[r.buf] = std::min(first[r.buf], r.alloc_seq);
    last[r.buf] = std::max(last[r.buf], r.release_seq);
  }
  LayoutProblem problem;
  problem.capacity = capacity;
  for (size_t b = 0; b < graph.buffers.size(); ++b) {
    if (first[b] == kNone || graph.buffers[b].bytes == 0) continue;
    problem.buffers.push_back({.id = static_cast<int64_t>(b),
                               .lower = static_cast<int64_t>(first[b]),
                               .upper = static_cast<int64_t>(last[b]),
                               .size = graph.buffers[b].bytes});
  }
  return problem;
}

Plan pin_offsets(Plan plan, const Graph& graph, const LayoutProblem& problem, const Layout& layout,
                 std::span<const Residency> residencies) {
  if (layout.offsets.size() != problem.buffers.size()) {
    fail("layout has {} offsets for {} buffers", layout.offsets.size(), problem.buffers.size());
  }
  plan.offsets.clear();
  for (const Residency& r : residencies) {
    if (r.buf >= 0 && static_cast<size_t>(r.buf) < graph.buffers.size() &&
        graph.buffers[r.buf].bytes == 0) {
      plan.offsets[r.buf] = 0;
    }
  }
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    plan.offsets[static_cast<BufferId>(problem.buffers[i].id)] = layout.offsets[i];
  }
  return plan;
}

SimulatedPlan simulate_plan_file(const std::string& path, const Graph& graph, const Hardware& hw,
                                 bool drop_offsets) {
  return simulate_plan_file(path, read_plan_file(path), graph, hw, drop_offsets);
}

SimulatedPlan simulate_plan_file(const std::string& path, Plan plan, const Graph& graph,
                                 const Hardware& hw, bool drop_offsets) {
  SimulatedPlan out;
  out.plan = std::move(plan);
  try {
    check_plan_graph(out.plan, graph);
    validate_plan(out.plan, graph);
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
  if (drop_offsets) out.plan.offsets.clear();
  out.sim = simulate(graph, out.plan, hw, {.record_curves = false, .record_residency = true});
  if (!out.sim.valid) fail("{}: the plan is invalid: {}", path, out.sim.reason);
  return out;
}

}  // namespace memwall
