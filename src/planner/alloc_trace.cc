// Allocation traces (alloc_trace.h).
#include "memwall/planner/alloc_trace.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/base/human.h"
#include "memwall/base/parse_values.h"
#include "memwall/graph/graph.h"
#include "memwall/layout/default_layout.h"
#include "memwall/layout/from_graph.h"
#include "memwall/layout/problem.h"
#include "memwall/planner/plan_layout.h"

namespace memwall {
namespace {

// Each allocation its own group: the layout places allocations one by one.
void one_group_each(AllocTrace& trace) {
  trace.layout_problem.buffers = trace.allocations;
  trace.group.resize(trace.allocations.size());
  for (size_t i = 0; i < trace.group.size(); ++i) trace.group[i] = i;
}

}  // namespace

AllocTrace graph_alloc_trace(const Graph& graph) {
  AllocTrace trace;
  trace.name = graph.name + " (default schedule)";
  // Buffers: from_graph.h's lifetimes, [alloc op, free op + 1).
  trace.allocations = layout_problem(graph).buffers;
  // Workspace: held while its op runs. Ids after the buffers' name them.
  for (const Op& op : graph.ops) {
    if (op.workspace == 0) continue;
    trace.allocations.push_back({.id = static_cast<int64_t>(graph.buffers.size()) + op.id,
                                 .lower = op.id,
                                 .upper = int64_t{op.id} + 1,
                                 .size = op.workspace});
  }
  one_group_each(trace);
  return trace;
}

AllocTrace plan_alloc_trace(const Graph& graph, const Plan& plan, const SimResult& sim) {
  if (!sim.valid) fail("the plan is invalid: {}", sim.reason);
  AllocTrace trace;
  trace.name = plan.graph + " (plan on " + plan.hardware + ")";
  // The layout places buffers, one address for all stays (plan_layout.h).
  trace.layout_problem = plan_layout_problem(graph, sim.residencies, 0);
  std::vector<size_t> group_of_buffer(graph.buffers.size(), 0);
  for (size_t g = 0; g < trace.layout_problem.buffers.size(); ++g) {
    group_of_buffer[static_cast<size_t>(trace.layout_problem.buffers[g].id)] = g;
  }
  for (const Residency& r : sim.residencies) {
    const uint64_t bytes = graph.buffers[r.buf].bytes;  // plan_layout_problem checked r.buf
    if (bytes == 0) continue;
    trace.allocations.push_back({.id = r.buf,
                                 .lower = static_cast<int64_t>(r.alloc_seq),
                                 .upper = static_cast<int64_t>(r.release_seq),
                                 .size = bytes});
    trace.group.push_back(group_of_buffer[r.buf]);
  }
  // A plan with an address per stay (Note [Offsets per stay]) is laid out
  // again here, one address per buffer.
  if (!plan.offsets.empty() && plan.stay_offsets.empty()) {
    Layout layout;
    for (const LayoutBuffer& b : trace.layout_problem.buffers) {
      const auto it = plan.offsets.find(static_cast<BufferId>(b.id));
      if (it == plan.offsets.end()) fail("the plan pins no offset for buffer {}", b.id);
      layout.offsets.push_back(it->second);
    }
    layout.arena = arena_of(trace.layout_problem, layout.offsets);
    trace.layout = std::move(layout);
    trace.layout_source = "the plan's offsets";
  }
  return trace;
}

AllocTrace csv_alloc_trace(const LayoutCsv& csv, std::string name) {
  AllocTrace trace;
  trace.name = std::move(name);
  trace.allocations = csv.problem.buffers;
  one_group_each(trace);
  if (csv.layout) {
    trace.layout = csv.layout;
    trace.layout_source = "the CSV's offsets";
  }
  return trace;
}

void add_layout(AllocTrace& trace, double seconds) {
  if (trace.layout) return;
  const DefaultLayoutResult result =
      solve_default_layout(trace.layout_problem, {.time_budget = seconds});
  trace.layout = result.layout;
  trace.layout_source = "memwall's default layout (" + result.algorithm + ")";
}

std::vector<alloc::ReplayEvent> replay_events(const AllocTrace& trace) {
  // (time, 0 = free / 1 = alloc, allocation index): sorting gives the order.
  std::vector<std::tuple<int64_t, int, size_t>> order;
  order.reserve(2 * trace.allocations.size());
  for (size_t i = 0; i < trace.allocations.size(); ++i) {
    order.emplace_back(trace.allocations[i].lower, 1, i);
    order.emplace_back(trace.allocations[i].upper, 0, i);
  }
  std::sort(order.begin(), order.end());
  std::vector<alloc::ReplayEvent> events;
  events.reserve(order.size());
  for (const auto& [time, is_alloc, i] : order) {
    events.push_back(
        {.kind = is_alloc ? alloc::ReplayEvent::Kind::alloc : alloc::ReplayEvent::Kind::free,
         .id = i,
         .bytes = is_alloc ? trace.allocations[i].size : 0});
  }
  return events;
}

alloc::Options plan_policy_options(const AllocTrace& trace) {
  if (!trace.layout) fail("the plan policy needs a layout of the trace");
  alloc::Options options;
  options.arena_bytes = trace.layout->arena;
  options.offsets.reserve(trace.allocations.size());
  for (size_t i = 0; i < trace.allocations.size(); ++i) {
    options.offsets.emplace(i, trace.layout->offsets.at(trace.group[i]));
  }
  return options;
}

uint64_t peak_live_bytes(const AllocTrace& trace) {
  LayoutProblem live;
  live.buffers = trace.allocations;
  return live_lower_bound(live);
}

PolicyReplay replay_policy(const AllocTrace& trace, std::string_view policy, uint64_t capacity,
                           const alloc::Options& options, uint64_t granularity) {
  return replay_policy(trace, replay_events(trace), policy, capacity, options, granularity);
}

PolicyReplay replay_policy(const AllocTrace& trace, const std::vector<alloc::ReplayEvent>& events,
                           std::string_view policy, uint64_t capacity,
                           const alloc::Options& options, uint64_t granularity) {
  alloc::Options tuned = options;
  if (policy == "plan") {
    const alloc::Options placed = plan_policy_options(trace);
    tuned.arena_bytes = placed.arena_bytes;
    tuned.offsets = placed.offsets;
  }
  PolicyReplay out;
  out.policy = std::string(policy);
  out.capacity = capacity;
  try {
    out.result = alloc::replay(policy, capacity, events, tuned, granularity);
    out.unlimited_peak_reserved = out.result.fits
                                      ? out.result.stats.peak_reserved_bytes
                                      : alloc::replay(policy, kMaxBytes, events, tuned, granularity)
                                            .stats.peak_reserved_bytes;
  } catch (const alloc::Error& e) {
    fail("{}", e.what());  // the alloc module's own error type, as memwall's
  }
  return out;
}

std::vector<PolicyReplay> replay_policies(AllocTrace& trace, const AllocSetup& setup) {
  std::vector<PolicyReplay> runs;
  const std::vector<alloc::ReplayEvent> events = replay_events(trace);
  for (const std::string& policy : setup.policies) {
    if (policy == "plan") add_layout(trace, setup.layout_seconds);
    runs.push_back(
        replay_policy(trace, events, policy, setup.capacity, setup.options, setup.granularity));
  }
  return runs;
}

std::optional<std::string> beyond_any_policy(const AllocTrace& trace, const AllocSetup& setup) {
  const uint64_t usable = setup.capacity / setup.granularity * setup.granularity;
  const std::string capacity =
      exact_bytes(usable) +
      (usable == setup.capacity
           ? ""
           : fmt::format(" (in whole {} chunks)", human_bytes(setup.granularity)));
  for (const LayoutBuffer& b : trace.allocations) {
    if (b.size > usable) {
      return fmt::format("{}: buffer {} of {} is larger than the device's capacity of {}",
                         trace.name, b.id, exact_bytes(b.size), capacity);
    }
  }
  try {
    peak_live_bytes(trace);
  } catch (const Error&) {
    return fmt::format("{}: more than 2^62 bytes are live at once, more than the device's {}",
                       trace.name, capacity);
  }
  return std::nullopt;
}

AllocSetup alloc_setup(const AllocRequest& request, const Hardware& hw) {
  const AllocRequest& r = request;
  AllocSetup setup;
  if (r.policy == "all") {
    for (const std::string_view p : alloc::policy_names()) setup.policies.emplace_back(p);
  } else {
    const auto names = alloc::policy_names();
    if (std::find(names.begin(), names.end(), r.policy) == names.end()) {
      fail("--policy: unknown policy '{}' (known: caching, expandable, stitching, plan, all)",
           r.policy);
    }
    setup.policies = {r.policy};
  }
  setup.capacity = r.capacity.empty()
                       ? hw.device_memory_bytes
                       : parse_bytes(r.capacity, "--capacity", hw.device_memory_bytes);
  setup.capacity_source = r.capacity.empty() ? hw.name + "'s memory" : "--capacity";
  setup.granularity = parse_bytes(r.granularity, "--granularity", 0);
  if ((setup.granularity & (setup.granularity - 1)) != 0 || setup.granularity % 4096 != 0) {
    fail("--granularity: {} is not a power of two of at least 4096 bytes", setup.granularity);
  }
  if (setup.capacity < setup.granularity) {
    fail("--capacity: {} bytes hold no {}-byte chunk", setup.capacity, setup.granularity);
  }
  if (!r.max_split_size.empty()) {
    setup.options.max_split_size = parse_bytes(r.max_split_size, "--max-split-size", 0);
  }
  if (!(r.layout_seconds > 0) || r.layout_seconds > 86400) {
    fail("--layout-time must be a number of seconds in (0, 86400] (got {})", r.layout_seconds);
  }
  setup.layout_seconds = r.layout_seconds;
  return setup;
}

std::string replay_table(const std::vector<PolicyReplay>& runs, uint64_t peak_live) {
  // A space before the counts' columns keeps huge counts apart.
  std::string out = fmt::format("  {:<11}{:>15}{:>15}{:>14}{:>15}{:>10} {:>8} {:>9}  {}\n",
                                "policy", "peak allocated", "peak reserved", "reserved/live",
                                "fragmentation", "segments", "maps", "stitches", "fits");
  for (const PolicyReplay& r : runs) {
    const alloc::Stats& s = r.result.stats;
    const double ratio = peak_live == 0 ? 0
                                        : static_cast<double>(s.peak_reserved_bytes) /
                                              static_cast<double>(peak_live);
    const std::string fits =
        r.result.fits
            ? "yes"
            : fmt::format("no: out of memory at event {}; needs {} reserved",
                          grouped(r.result.failed_event), human_bytes(r.unlimited_peak_reserved));
    out += fmt::format("  {:<11}{:>15}{:>15}{:>14.4f}{:>14.2f}%{:>10} {:>8} {:>9}  {}\n", r.policy,
                       human_bytes(s.peak_allocated_bytes), human_bytes(s.peak_reserved_bytes),
                       ratio, 100 * s.fragmentation(), grouped(s.segments_created), grouped(s.maps),
                       grouped(s.stitches), fits);
  }
  return out;
}

}  // namespace memwall
