// memwall's own rematerialization planner (remat.h, docs/remat-memwall.md).
//
// Note [One judge, many proposers]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// No single schedule family is best at every budget. Just under the
// keep-all peak, dropping a few cheap, large activations (softmax outputs,
// dropout masks, normalized inputs) at op granularity costs a fraction of
// what recomputing whole layers does; near the floor only multi-level
// recomputation of segments (Rotor's revolve-like schedules) or online
// eviction (DTR) fits at all. So the planner proposes plans from several
// families and lets the simulator, the one judge, pick the shortest
// simulated iteration within the budget:
//   1. keep-all, when it fits;
//   2. its op-level search over keep sets (memwall_search.cc): per
//      segmentation, a bisected cheapest-per-byte prefix of drops, refined
//      by re-keeping in groups and by swaps;
//   3. structured proposers run at the same budget: per-layer, selective, selective-op,
//      chen-sqrt, chen-greedy and the Rotor dynamic program on the linearized
//      chain (in the paper's model, and with inputs freed after their last
//      forward, Note [Inputs freed after their last forward] in rotor.cc),
//      and DTR's online evictions (all four heuristics), which fit lowest;
//   4. memwall's lookahead evictions: DTR's engine scoring by the distance
//      to each buffer's next use, which an offline planner knows;
//   5. Checkmate's MILP, last (Note [Checkmate as a proposer]).
//
// Note [Checkmate as a proposer]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Checkmate is the one baseline not otherwise among the proposers, and the
// planner must never be worse than a baseline it can run (issue 45). Its
// MILP gets 1 CPU second of CBC (CPU, not wall, time: the same answer
// however loaded the machine is, short of a solution found near the end
// of the second) within the wall time left:
//   - on graphs of at most 100 ops, at every budget, started from the best
//     plan so far: its MILP is op by op there, so the planner is exact (or
//     within CBC's gap);
//   - on larger graphs, where its MILP is over Rotor's chain of 24 stages
//     (or 48 op groups), which the 48-stage Rotor proposer and the op-level
//     search refine, only below what the others reach: once in the floor
//     search, just below the lowest peak so far (on vgg16 b2 i64 it fits
//     786,432 bytes below the op-level search's floor, where Rotor's DP
//     would need more than its 500 memory slots), and at a budget below
//     the floor. The floor's probe gets 2 CPU seconds: CBC's search does
//     not depend on its time limit, so it goes on past where a 1-second
//     Checkmate at the same budget stops and finds no less. With 1, under
//     ASan (CBC's allocations slower) a 1-second Checkmate run beside it
//     once found a plan 786,432 B below the floor and the probe none. On the zoo (batch 2, from the floor
//     to 70% of the way to the keep-all peak) its plan was never the faster
//     where another fitted (on vgg16 not even proven optimal, with 8 CPU
//     seconds), while a call took about 1.7 CPU seconds (1-4.7 s of wall
//     time on the loaded 2-vCPU machine) against 0.02-0.5 s for all the
//     other proposers.
// The automatic planner, which runs this planner once per configuration
// and try within one time limit, turns the part below the floor off
// (RematOptions::memwall_checkmate_below_floor): with it, every failing
// try paid for the floor search's CBC second, and finding the largest
// GPT-2 that trains on an RTX 4090 (MaxModel.TriesTheFamilyFromTheLargest)
// took 9 s instead of 1.6 s on the loaded 2-vCPU machine.
// Where it runs below the floor, a plan that fits keeps the promise of
// Note [Floor search]: the floor's plan, if Checkmate's, is the plan of
// every budget between its peak and the others' lowest, and no slower in
// Checkmate's model than its plan at that budget would be (the optimum
// only grows as the budget falls).
//
// Note [Floor search]
// ~~~~~~~~~~~~~~~~~~~
// "Budget too small" messages give the lowest budget the planner reaches,
// found by remat_floor: the lowest peak over the op-level search's
// all-dropped keep sets, the budget-free proposers' plans, chen-greedy's
// threshold grid, and, for each budget-driven proposer, a bisection over
// budgets between the proven lower bound (remat_lower_bound) and the lowest
// peak so far. The bisection is geometric while the two ends are more than
// a factor 2 apart (a keep-all peak of terabytes over a floor of gigabytes
// needs relative, not absolute, steps) and stops after a proposer's probes.
// The floor is the peak of a plan actually produced, so it is reached, not
// estimated; and when plan_memwall's search finds nothing at a budget at or
// above it, it returns that plan, so the planner finds a plan at every
// budget from the floor up. Feasibility is not monotone for heuristics
// (DTR may fail at a budget above one it meets) and the probes are few, so
// a plan below the floor may exist: the floor is not a proven minimum, and
// messages say so, quoting the proven lower bound beside it.
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "dtr.h"
#include "memwall/base/deadline.h"
#include "memwall/base/error.h"
#include "memwall/graph/describe.h"
#include "memwall/graph/graph.h"
#include "memwall/plan/builders.h"
#include "memwall/remat/remat.h"
#include "memwall_search.h"
#include "planner_common.h"

namespace memwall {
namespace {

using remat_detail::judge;
using remat_detail::Judged;
using remat_detail::Stopwatch;

// How remat_floor finds the lowest budget a proposer meets.
enum class FloorBy : uint8_t {
  kUnlimited,   // its plan is the same at any budget: the unlimited plan's peak
  kThresholds,  // chen-greedy: the lowest peak over its threshold grid
  kBisection,   // budget-driven: bisect over budgets, `probes` times
};

// Rotor's DP with inputs freed after their last forward (Note [Inputs freed
// after their last forward] in rotor.cc). Beside the paper's model, not
// instead: it allows every schedule the paper's does, and is never slower
// at a budget, but its plans use the room it frees, so their peaks sit
// nearer the budget, and a floor bisection over the paper's model ends
// lower on some graphs (gpt2-small b4 s1024: 4,624,135,680 B, the proven
// bound, against 4,627,232,256 B).
RematResult plan_rotor_freeing_inputs(const Graph& graph, const Hardware& hardware, uint64_t budget,
                                      const RematOptions& options) {
  RematOptions freeing = options;
  freeing.rotor_frees_inputs = true;
  return plan_rotor(graph, hardware, budget, freeing);
}

// Every proposer, tried at every budget: the structured offline baselines,
// DTR's online evictions, which reach lowest, and memwall's own variants:
// Rotor freeing inputs, and lookahead evictions (DTR's engine scoring by
// the distance to each buffer's next use, Note [Lookahead] in
// dtr_heuristics.cc). DTR's probes cost O(n) evictions each, so their
// bisection stops at 1/256; so does the second Rotor's, which starts where
// the first left the floor.
struct Proposer {
  std::string_view name;
  RematFn fn;
  FloorBy floor;
  int probes = 0;
};
constexpr std::array<Proposer, 13> kProposers = {{
    {"per-layer", plan_per_layer, FloorBy::kUnlimited},
    {"selective", plan_selective, FloorBy::kUnlimited},
    {"selective-op", plan_selective_op, FloorBy::kUnlimited},
    {"chen-sqrt", remat_detail::chen_sqrt_rule, FloorBy::kUnlimited},
    {"chen-greedy", plan_chen_greedy, FloorBy::kThresholds},
    {"rotor", plan_rotor, FloorBy::kBisection, 14},
    {"memwall-rotor", plan_rotor_freeing_inputs, FloorBy::kBisection, 8},
    {"dtr", plan_dtr, FloorBy::kBisection, 8},
    {"dtr-eqclass", plan_dtr_eqclass, FloorBy::kBisection, 8},
    {"dtr-lru", plan_dtr_lru, FloorBy::kBisection, 8},
    {"dtr-largest", plan_dtr_largest, FloorBy::kBisection, 8},
    {"memwall-lookahead", plan_dtr_lookahead, FloorBy::kBisection, 8},
    {"memwall-lookahead-eqclass", plan_dtr_lookahead_eqclass, FloorBy::kBisection, 8},
}};

// Graphs this small get Checkmate's op-level MILP as a proposer at every
// budget, larger ones below what the others reach (Note [Checkmate as a
// proposer]; docs/remat-checkmate.md solves up to 100 ops op by op).
constexpr size_t kExactOps = 100;
constexpr double kExactSeconds = 1;

// Seconds the op-level search may take: enough for thousands of
// evaluations on small graphs, growing with the graph up to 1.5 s (the
// proposers take the rest of a large graph's time).
double search_seconds(const Graph& graph) {
  return std::min(0.1 + 1e-4 * static_cast<double>(graph.ops.size()), 1.5);
}

// The exact proposer is not started with less than this many seconds left.
constexpr double kLeastExact = 0.1;
// The options of the Checkmate proposer: CBC's CPU second within the wall
// time left, for the same plan however loaded the machine is.
RematOptions exact_options(const RematOptions& proposer, const Deadline& deadline,
                           double cpu_seconds = kExactSeconds) {
  RematOptions milp = proposer;
  milp.time_limit = deadline.left();
  milp.cpu_time_limit = std::min(milp.time_limit, cpu_seconds);
  return milp;
}
// The floor search's probe below the lowest peak gets twice that (Note
// [Checkmate as a proposer]).
constexpr double kFloorExactSeconds = 2 * kExactSeconds;

// Rotor as a proposer runs on a coarser chain than the baseline's 128
// stages: 48 stages take an eighth of the DP time (O(stages^3)) and lose
// little where the op-level search already covers the fine grain.
constexpr size_t kProposerRotorStages = 48;

// The options every proposer runs with, in plan_memwall and remat_floor
// alike (so the floor is a budget plan_memwall meets).
RematOptions proposer_options(const RematOptions& options) {
  RematOptions proposer = options;
  proposer.rotor_stages = std::min(options.rotor_stages, kProposerRotorStages);
  return proposer;
}

// The plan of a proposer at `budget`, judged; invalid when it declines.
Judged propose(const Graph& graph, const Hardware& hardware, uint64_t budget, std::string_view name,
               RematFn fn, const RematOptions& options) {
  try {
    RematResult r = fn(graph, hardware, budget, options);
    // The planner's last step simulated the plan already (finish).
    return Judged{.plan = std::move(r.plan),
                  .valid = true,
                  .peak = r.simulated_peak,
                  .time = r.simulated_time,
                  .how = fmt::format("{}: {}", name, r.note)};
  } catch (const Error&) {
    return Judged{};
  }
}

std::string gib(uint64_t bytes) {
  return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / double(uint64_t{1} << 30));
}

// "at op N (name): params X, ..." for the device peak of `plan`.
std::string describe_peak(const Graph& graph, const Hardware& hardware, const Plan& plan) {
  Plan unlimited = plan;
  unlimited.budget = kMaxBytes;
  const SimResult sim =
      simulate(graph, unlimited, hardware,
               {.record_timeline = true, .record_curves = false, .record_residency = true});
  // Replay the residencies in the simulator's own order to find the set of
  // buffers resident at the peak.
  struct Event {
    uint64_t seq;
    int64_t sign;
    size_t index;
  };
  std::vector<Event> events;
  for (size_t i = 0; i < sim.residencies.size(); ++i) {
    events.push_back({sim.residencies[i].alloc_seq, 1, i});
    events.push_back({sim.residencies[i].release_seq, -1, i});
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.seq < b.seq || (a.seq == b.seq && a.sign < b.sign);
  });
  uint64_t live = 0;
  uint64_t peak_live = 0;
  uint64_t peak_seq = 0;
  for (const Event& e : events) {
    const uint64_t bytes = graph.buffers[sim.residencies[e.index].buf].bytes;
    live = e.sign > 0 ? live + bytes : live - bytes;
    if (live > peak_live) {
      peak_live = live;
      peak_seq = e.seq;
    }
  }
  std::map<BufferKind, uint64_t> by_kind;
  for (const Residency& r : sim.residencies) {
    if (r.alloc_seq <= peak_seq && peak_seq < r.release_seq) {
      by_kind[graph.buffers[r.buf].kind] += graph.buffers[r.buf].bytes;
    }
  }
  const uint64_t peak = device_peak(sim);
  std::string where;
  const double t = sim.peak_time[static_cast<int>(Tier::kDevice)];
  for (const Span& span : sim.timeline) {
    if (span.resource == Resource::kCompute && span.start <= t && t < span.end) {
      where = fmt::format(" at {}", detail::op_label(graph, plan.steps[span.step].op));
      break;
    }
  }
  std::string parts;
  for (const auto& [kind, bytes] : by_kind) {
    parts += fmt::format("{}{} {}", parts.empty() ? "" : ", ", to_string(kind), gib(bytes));
  }
  if (peak > peak_live) {
    parts += fmt::format("{}workspace {}", parts.empty() ? "" : ", ", gib(peak - peak_live));
  }
  return fmt::format("peak{}: {}", where, parts);
}

}  // namespace

OpWorkingSet op_working_set(const Graph& graph, const Op& op) {
  std::vector<BufferId> held(op.in.begin(), op.in.end());
  held.insert(held.end(), op.updates.begin(), op.updates.end());
  for (const BufferId v : op.out) {
    // A next version can take over its predecessor's storage (Note [Buffer versions]).
    const BufferId prev = graph.buffers[v].version_of;
    if (prev == kNoBuffer || std::find(op.in.begin(), op.in.end(), prev) == op.in.end()) {
      held.push_back(v);
    }
  }
  std::sort(held.begin(), held.end());
  held.erase(std::unique(held.begin(), held.end()), held.end());
  OpWorkingSet set{.transient = contiguous_workspace(op)};
  for (const BufferId b : held) {
    uint64_t& side = is_persistent(graph.buffers[b].kind) ? set.persistent : set.transient;
    side = checked_add(side, graph.buffers[b].bytes, "an op's working set");
  }
  return set;
}

RematBound remat_lower_bound(const Graph& graph) {
  uint64_t states = 0;
  for (const Buffer& b : graph.buffers) {
    if (is_persistent(b.kind)) states += b.bytes;
  }
  RematBound bound{.bytes = states, .why = "the model states alone"};
  for (const Op& op : graph.ops) {
    const uint64_t working = op_working_set(graph, op).transient;
    if (states + working > bound.bytes) {
      bound.bytes = states + working;
      bound.why = fmt::format(
          "{} holds {} bytes ({}) of inputs, outputs and workspace beside {} "
          "bytes ({}) of model states",
          detail::op_label(graph, op.id), working, gib(working), states, gib(states));
    }
  }
  return bound;
}

RematResult plan_memwall(const Graph& graph, const Hardware& hardware, uint64_t budget,
                         const RematOptions& options) {
  const Stopwatch clock;
  const Deadline deadline = remat_detail::work_deadline(options);
  const RematBound bound = remat_lower_bound(graph);
  if (budget < bound.bytes) {
    throw BudgetError(
        fmt::format("memwall: no plan can fit a budget of {} bytes ({}): {}, {} bytes ({}) in all",
                    budget, gib(budget), bound.why, bound.bytes, gib(bound.bytes)),
        bound.bytes);
  }
  Judged best = judge(graph, hardware, default_plan(graph, hardware.name, budget),
                      "keep-all fits: nothing recomputed");
  if (!best.fits(budget)) {
    remat_detail::CheckpointSearch search(graph, hardware, budget);
    best = search.run(clock, std::min(search_seconds(graph), clock.seconds() + deadline.left()));
    best.how += fmt::format(" ({} plans simulated)", search.evaluations());
    RematOptions proposer = proposer_options(options);
    size_t skipped = 0;
    for (const Proposer& p : kProposers) {
      if (deadline.passed()) {
        ++skipped;
        continue;
      }
      proposer.time_limit = deadline.left();
      best.keep_better(propose(graph, hardware, budget, p.name, p.fn, proposer), budget);
    }
    // Note [Checkmate as a proposer]: on small graphs the last one,
    // started from the best plan so far.
    // Note [Builds without CBC]: no Checkmate to propose.
    const bool exact = graph.ops.size() <= kExactOps && cbc_available();
    if (exact && deadline.left() > kLeastExact) {
      RematOptions milp = exact_options(proposer, deadline);
      if (best.fits(budget)) milp.warm_start = &best.plan;
      best.keep_better(propose(graph, hardware, budget, "checkmate", plan_checkmate, milp), budget);
    } else if (exact) {
      ++skipped;
    }
    if (skipped > 0 && best.fits(budget)) {
      best.how += fmt::format(" ({} of {} proposers not run: the time limit)", skipped,
                              kProposers.size() + exact);
    }
  }
  if (!best.fits(budget)) {
    // Note [Floor search]: the floor's plan, when it fits, so that every
    // budget from the floor up has a plan.
    RematOptions floor_options = options;
    floor_options.time_limit = std::max(0.0, deadline.left());
    RematFloor floor = remat_floor(graph, hardware, floor_options);
    if (floor.bytes <= budget) {
      best = judge(graph, hardware, std::move(floor.plan),
                   fmt::format("the floor search's plan, {}", floor.why));
    } else if (graph.ops.size() > kExactOps && options.memwall_checkmate_below_floor &&
               cbc_available() &&
               deadline.left() > kLeastExact) {
      // Note [Checkmate as a proposer]: on larger graphs, last, below the
      // floor, at the budget itself.
      best = propose(graph, hardware, budget, "checkmate", plan_checkmate,
                     exact_options(proposer_options(options), deadline));
    }
    if (!best.fits(budget)) {
      throw BudgetError(
          fmt::format(
              "memwall: no plan found within a budget of {} bytes ({}){}; the lowest budget it "
              "reaches is {} bytes ({}), {}; none can fit below {} bytes ({})",
              budget, gib(budget),
              floor.cut_short ? fmt::format(" in the {} s time limit", options.time_limit) : "",
              floor.bytes, gib(floor.bytes), floor.why, floor.bound.bytes, gib(floor.bound.bytes)),
          floor.bytes);
    }
  }
  best.plan.budget = budget;
  return remat_detail::finish(graph, hardware, budget, std::move(best.plan), "memwall",
                              std::move(best.how), clock);
}

RematFloor remat_floor(const Graph& graph, const Hardware& hardware, const RematOptions& options) {
  // Past the deadline the search stops with the lowest peak reached so far.
  const Deadline deadline = Deadline::in(options.time_limit);
  bool cut_short = false;
  const auto out_of_time = [&] { return cut_short = cut_short || deadline.passed(); };
  Judged lowest = judge(graph, hardware, default_plan(graph, hardware.name, kMaxBytes), "keep-all");
  const auto consider = [&](Judged judged) {
    if (judged.valid && judged.peak < lowest.peak) lowest = std::move(judged);
  };
  remat_detail::CheckpointSearch search(graph, hardware, kMaxBytes);
  consider(search.lowest());
  RematOptions proposer = proposer_options(options);
  const RematBound bound = remat_lower_bound(graph);
  for (const Proposer& p : kProposers) {
    if (out_of_time()) break;
    proposer.time_limit = deadline.left();
    switch (p.floor) {
      case FloorBy::kUnlimited:
        consider(propose(graph, hardware, kMaxBytes, p.name, p.fn, proposer));
        break;
      case FloorBy::kThresholds:
        for (remat_detail::ChenGreedyPlan& c : remat_detail::chen_greedy_plans(graph, hardware)) {
          consider(Judged{.plan = std::move(c.plan),
                          .valid = true,
                          .peak = c.peak,
                          .time = c.time,
                          .how = fmt::format("{}: threshold {:.0f} bytes", p.name, c.threshold)});
        }
        break;
      case FloorBy::kBisection: {
        // The lowest peak it reaches, to within 1/1024 or its probes, from
        // the lower bound up (Note [Floor search]).
        uint64_t lo = std::min(bound.bytes, lowest.peak);
        uint64_t hi = lowest.peak;
        for (int probe = 0;
             probe < p.probes && hi - lo > std::max<uint64_t>(hi / 1024, 1) && !out_of_time();
             ++probe) {
          proposer.time_limit = deadline.left();
          const uint64_t mid = lo > 0 && hi / 2 > lo
                                   ? static_cast<uint64_t>(std::sqrt(static_cast<double>(lo)) *
                                                           std::sqrt(static_cast<double>(hi)))
                                   : lo + (hi - lo) / 2;
          Judged judged = propose(graph, hardware, mid, p.name, p.fn, proposer);
          if (judged.fits(mid)) {
            hi = std::max(lo + 1, judged.peak);
            consider(std::move(judged));
          } else {
            lo = mid;
          }
        }
        break;
      }
    }
  }
  // Note [Checkmate as a proposer]: its MILP once, just below the lowest
  // peak so far, where its continuous model may fit what Rotor's memory
  // slots round away. (Every plan so far peaks above that budget: no warm
  // start.)
  if (options.memwall_checkmate_below_floor && cbc_available() && lowest.peak > bound.bytes &&
      deadline.left() > kLeastExact && !out_of_time()) {
    consider(propose(graph, hardware, lowest.peak - 1, "checkmate", plan_checkmate,
                     exact_options(proposer, deadline, kFloorExactSeconds)));
  }
  RematFloor floor{
      .bytes = lowest.peak,
      .why = fmt::format("{} ({})", describe_peak(graph, hardware, lowest.plan), lowest.how),
      .plan = std::move(lowest.plan),
      .bound = bound,
      .cut_short = cut_short};
  floor.plan.budget = floor.bytes;
  return floor;
}

}  // namespace memwall
