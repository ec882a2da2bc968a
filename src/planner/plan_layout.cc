// Laying out a plan (plan_layout.h).
#include "memwall/planner/plan_layout.h"

#include <algorithm>
#include <limits>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/base/human.h"
#include "memwall/layout/problem.h"
#include "memwall/layout/registry.h"

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
  plan.stay_offsets.clear();
  plan.workspace_offsets.clear();
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

namespace {

// Union-find over residencies, for the stays one layout item covers.
size_t root_of(std::vector<size_t>& parent, size_t i) {
  while (parent[i] != i) i = parent[i] = parent[parent[i]];
  return i;
}

}  // namespace

StayLayoutProblem stay_layout_problem(const Graph& graph, const Plan& plan,
                                      std::span<const Residency> residencies,
                                      std::span<const Residency> workspaces, uint64_t capacity) {
  const size_t n = residencies.size();
  std::vector<size_t> parent(n);
  for (size_t i = 0; i < n; ++i) parent[i] = i;
  constexpr size_t kNone = std::numeric_limits<size_t>::max();
  // Stays still open when the simulation ends carry the largest sequence
  // number (Residency).
  uint64_t end_seq = 0;
  for (const Residency& r : residencies) end_seq = std::max(end_seq, r.release_seq);
  std::vector<size_t> first_stay(graph.buffers.size(), kNone);
  for (size_t i = 0; i < n; ++i) {
    const Residency& r = residencies[i];
    if (r.buf < 0 || static_cast<size_t>(r.buf) >= graph.buffers.size()) {
      fail("residency of unknown buffer {}", r.buf);
    }
    const auto join = [&](size_t other) { parent[root_of(parent, i)] = root_of(parent, other); };
    if (r.continues >= 0 && static_cast<size_t>(r.continues) < i &&
        graph.buffers[residencies[r.continues].buf].bytes == graph.buffers[r.buf].bytes) {
      join(static_cast<size_t>(r.continues));
    }
    // Persistent state that starts on the device ends where it started: its
    // first stay (the initial placement) and its last, still open, are one.
    if (is_persistent(graph.buffers[r.buf].kind)) {
      const auto placed = plan.placement.find(r.buf);
      const bool starts_on_device =
          placed == plan.placement.end() || placed->second == Tier::kDevice;
      if (first_stay[r.buf] == kNone) {
        first_stay[r.buf] = i;
      } else if (starts_on_device && r.release_seq == end_seq) {
        join(first_stay[r.buf]);
      }
    }
  }
  StayLayoutProblem out;
  out.problem.capacity = capacity;
  out.item_of_stay.assign(n, -1);
  std::vector<int64_t> item_of_root(n, -1);
  for (size_t i = 0; i < n; ++i) {
    const Residency& r = residencies[i];
    const uint64_t bytes = graph.buffers[r.buf].bytes;
    if (bytes == 0) continue;
    const size_t root = root_of(parent, i);
    int64_t& item = item_of_root[root];
    if (item < 0) {
      item = static_cast<int64_t>(out.problem.buffers.size());
      out.problem.buffers.push_back({.id = item,
                                     .lower = static_cast<int64_t>(r.alloc_seq),
                                     .upper = static_cast<int64_t>(r.release_seq),
                                     .size = bytes});
    }
    LayoutBuffer& b = out.problem.buffers[static_cast<size_t>(item)];
    b.lower = std::min(b.lower, static_cast<int64_t>(r.alloc_seq));
    b.upper = std::max(b.upper, static_cast<int64_t>(r.release_seq));
    b.size = std::max(b.size, bytes);
    out.item_of_stay[i] = item;
  }
  out.workspace_of.assign(out.problem.buffers.size(), kNoOp);  // the stays' items
  for (const Residency& r : workspaces) {
    if (r.op < 0 || static_cast<size_t>(r.op) >= graph.ops.size()) {
      fail("workspace stay of unknown op {}", r.op);
    }
    if (contiguous_workspace(graph.ops[r.op]) == 0) continue;
    out.workspace_of.push_back(r.op);
    out.problem.buffers.push_back({.id = static_cast<int64_t>(out.problem.buffers.size()),
                                   .lower = static_cast<int64_t>(r.alloc_seq),
                                   .upper = static_cast<int64_t>(r.release_seq),
                                   .size = contiguous_workspace(graph.ops[r.op])});
  }
  return out;
}

Plan pin_stay_offsets(Plan plan, const StayLayoutProblem& stays, const Layout& layout,
                      std::span<const Residency> residencies) {
  const LayoutProblem& problem = stays.problem;
  if (layout.offsets.size() != problem.buffers.size() ||
      stays.item_of_stay.size() != residencies.size()) {
    fail("layout has {} offsets for {} items", layout.offsets.size(), problem.buffers.size());
  }
  plan.offsets.clear();
  plan.stay_offsets.clear();
  plan.workspace_offsets.clear();
  std::map<BufferId, std::vector<uint64_t>> each;  // every stay's offset, in order
  for (size_t i = 0; i < residencies.size(); ++i) {
    const int64_t item = stays.item_of_stay[i];
    each[residencies[i].buf].push_back(item < 0 ? 0 : layout.offsets[static_cast<size_t>(item)]);
  }
  // One offset for every stay, or the list (lambdas see no bindings in clang 14).
  const auto all_equal = [](const std::vector<uint64_t>& v) {
    return std::all_of(v.begin(), v.end(), [&](uint64_t o) { return o == v.front(); });
  };
  for (const auto& [buf, offsets] : each) {
    plan.offsets[buf] = offsets.front();
    if (!all_equal(offsets)) plan.stay_offsets[buf].assign(offsets.begin() + 1, offsets.end());
  }
  // Workspace items are in run order (SimResult::workspaces).
  for (size_t i = 0; i < problem.buffers.size(); ++i) {
    if (const OpId op = stays.workspace_of.at(i); op != kNoOp) {
      plan.workspace_offsets[op].push_back(layout.offsets[i]);
    }
  }
  for (auto& [op, runs] : plan.workspace_offsets) {
    if (all_equal(runs)) runs.resize(1);
  }
  return plan;
}

Plan pin_layout(const Graph& graph, const Plan& plan, const Hardware& hw,
                const LayoutProblem& problem, const Layout& layout, const StayLayoutProblem* stays,
                std::span<const Residency> residencies) {
  SimResult sim;
  if (residencies.empty()) {
    sim = simulate(graph, plan, hw, {.record_curves = false, .record_residency = true});
    residencies = sim.residencies;
  }
  const Plan pinned = stays ? pin_stay_offsets(plan, *stays, layout, residencies)
                            : pin_offsets(plan, graph, problem, layout, residencies);
  const SimResult check = simulate(graph, pinned, hw, {.record_curves = false});
  if (!check.valid) fail("internal error: the simulator rejects the pinned plan: {}", check.reason);
  return pinned;
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
  if (drop_offsets) {
    out.plan.offsets.clear();
    out.plan.stay_offsets.clear();
    out.plan.workspace_offsets.clear();
  }
  out.sim = simulate(graph, out.plan, hw, {.record_curves = false, .record_residency = true});
  if (!out.sim.valid) fail("{}: the plan is invalid: {}", path, out.sim.reason);
  return out;
}

// Note [Plans laid out by default]
PlanLayout lay_out_plan(const Plan& plan, const Graph& graph, const Hardware& hw,
                        double time_limit) {
  PlanLayout out;
  out.plan = plan;
  out.plan.offsets.clear();
  out.plan.stay_offsets.clear();
  out.plan.workspace_offsets.clear();
  const SimResult sim =
      simulate(graph, out.plan, hw, {.record_curves = false, .record_residency = true});
  if (!sim.valid) fail("internal error: the simulator rejects the plan: {}", sim.reason);
  out.live_peak = sim.peak_bytes[0];
  StayLayoutProblem stays =
      stay_layout_problem(graph, out.plan, sim.residencies, sim.workspaces, plan.budget);
  LayoutProblem& problem = stays.problem;
  if (problem.buffers.empty()) {
    out.row_text = "nothing on the device to place";
    return out;
  }
  // Aligned as PyTorch's CPU allocator aligns (64 bytes), so that kernels
  // see the addresses eager gives them and scratch packs into a workspace;
  // byte-aligned only when that does not fit the budget.
  problem.alignment = 64;
  validate_problem(problem);
  LayoutRun run = run_layout(problem, "default", time_limit);
  if (!run.fits()) {
    problem.alignment = 1;
    run = run_layout(problem, "default", time_limit);
  }
  out.alignment = problem.alignment;
  out.seconds = run.seconds;
  if (run.layout) out.arena = run.layout->arena;
  const double ratio =
      out.live_peak == 0 ? 0 : static_cast<double>(out.arena) / static_cast<double>(out.live_peak);
  if (!run.fits()) {
    out.row_text = fmt::format(
        "none within the budget: the best arena, {}, is {:.4f}x the live peak (Note [Plans "
        "laid out by default])",
        run.layout ? human_bytes(out.arena) : std::string("none found"), ratio);
    return out;
  }
  Plan pinned = pin_stay_offsets(out.plan, stays, *run.layout, sim.residencies);
  const SimResult check = simulate(graph, pinned, hw, {.record_curves = false});
  if (!check.valid) fail("internal error: the simulator rejects the pinned plan: {}", check.reason);
  out.plan = std::move(pinned);
  out.pinned = true;
  out.row_text = fmt::format(
      "arena {} = {:.4f}x the live peak ({} buffers, {} of them moving between stays; {} "
      "workspaces; {}-byte aligned; {})",
      human_bytes(out.arena), ratio, grouped(out.plan.offsets.size()),
      grouped(out.plan.stay_offsets.size()), grouped(out.plan.workspace_offsets.size()),
      out.alignment, human_seconds(out.seconds));
  return out;
}

nlohmann::json layout_json(const PlanLayout& laid) {
  const double ratio = laid.live_peak == 0
                           ? 0
                           : static_cast<double>(laid.arena) / static_cast<double>(laid.live_peak);
  return {{"pinned", laid.pinned},
          {"arena_bytes", laid.arena},
          {"live_peak_bytes", laid.live_peak},
          {"arena_over_live_peak", ratio},
          {"alignment", laid.alignment},
          {"seconds", laid.seconds}};
}

}  // namespace memwall
