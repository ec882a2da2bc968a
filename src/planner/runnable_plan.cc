// Note [Plans that run]
// ~~~~~~~~~~~~~~~~~~~~~
// The simulator counts bytes; `memwall run` runs a plan in one of two
// places, and `memwall plan` writes only what runs there (issue 45):
//  - a plan with offsets runs in the arena its layout gives: exactly the
//    layout, within the budget (docs/exec.md, "Plans with offsets");
//  - a plan without runs on the runtime allocator (stitching by default),
//    over a device of the budget that maps whole 2 MiB chunks and rounds
//    blocks to 512 bytes. A plan within its budget to the byte may need a
//    chunk more than the budget holds: a two-layer T5's remat plan at 50%
//    of its peak (no layout within 10.03 MB) ran out at 8,159,188 bytes
//    live in 8 MiB, the 10.03 MB budget holding only four chunks.
// So a plan is written when its layout fits, or when its allocations (each
// device stay the simulator records and each op's workspace while it runs)
// replayed through the stitching allocator on a device of the budget fit
// (`alloc::replay`, what `memwall alloc-replay --plan` reports). Otherwise
// `memwall plan` plans again for a budget that leaves room for the excess
// of this plan over its live peak (its layout's fragmentation, or what the
// allocator reserved beyond it), at least what overshot less, at most
// kReplans times, and then refuses, saying both. A plan the allocator holds
// but no layout fits is planned again too (laid out, it runs as planned,
// without fragmentation), and written without offsets only when no plan
// for less is laid out.
// `memwall run` checks a plan without offsets the same way before it runs,
// with the policy it runs on. The replay is the allocator's own code: the
// kernels' scratch comes as one block per op, where a kernel may make
// several, the one approximation left.
#include "memwall/planner/runnable_plan.h"

#include <algorithm>

#include <fmt/format.h>

#include "memwall/alloc/allocator.h"
#include "memwall/base/error.h"
#include "memwall/base/human.h"
#include "memwall/planner/alloc_trace.h"
#include "memwall/sim/simulator.h"

namespace memwall {

std::string AllocatorFit::text() const {
  const uint64_t chunk = alloc::kDefaultGranularity;
  if (fits) {
    return fmt::format("on the {} allocator it reserves {} of the budget's {} in {} chunks", policy,
                       human_bytes(peak_reserved), human_bytes(usable), human_bytes(chunk));
  }
  return fmt::format(
      "on the {} allocator it needs {} reserved ({} live at most), and the budget holds {} in "
      "{} chunks",
      policy, exact_bytes(peak_reserved), exact_bytes(peak_live), exact_bytes(usable),
      human_bytes(chunk));
}

AllocatorFit allocator_fit(const Graph& graph, const Plan& plan, const Hardware& hw,
                           std::string_view policy) {
  Plan bare = plan;
  bare.offsets.clear();
  bare.stay_offsets.clear();
  bare.workspace_offsets.clear();
  const SimResult sim = simulate(graph, bare, hw,
                                 {.record_curves = false,
                                  .record_residency = true,
                                  .live_scratch = true,
                                  .host_block_bytes = kRunHostBlockBytes});
  if (!sim.valid) fail("the simulator rejects the plan: {}", sim.reason);
  AllocTrace trace = plan_alloc_trace(graph, bare, sim);
  // Each op's workspace while it runs, in the same sequence numbers.
  for (const Residency& w : sim.workspaces) {
    const uint64_t bytes = graph.ops[w.op].workspace;
    if (bytes == 0) continue;
    trace.allocations.push_back({.id = static_cast<int64_t>(graph.buffers.size()) + w.op,
                                 .lower = static_cast<int64_t>(w.alloc_seq),
                                 .upper = static_cast<int64_t>(w.release_seq),
                                 .size = bytes});
    trace.group.push_back(trace.group.size());
  }
  const PolicyReplay replay = replay_policy(trace, policy, plan.budget);
  AllocatorFit fit;
  fit.policy = std::string(policy);
  fit.fits = replay.result.fits;
  fit.usable = plan.budget / alloc::kDefaultGranularity * alloc::kDefaultGranularity;
  fit.peak_live = peak_live_bytes(trace);
  fit.peak_reserved = replay.unlimited_peak_reserved;
  return fit;
}

std::string RunnablePlan::row_text() const {
  if (laid && laid->pinned) return laid->row_text;
  std::string text = laid ? laid->row_text : std::string("not laid out (--no-layout)");
  if (fit) {
    text +=
        fmt::format("; {}{}", fit->text(), runs ? ": written without offsets, it runs there" : "");
  }
  return text;
}

std::string RunnablePlan::why_not() const {
  std::vector<std::string> parts;
  if (laid && !laid->pinned) parts.push_back("its layout " + laid->row_text);
  if (fit && !fit->fits) parts.push_back(fit->text());
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

nlohmann::json RunnablePlan::json() const {
  nlohmann::json j = laid ? layout_json(*laid) : nlohmann::json::object();
  if (!laid) j["pinned"] = false;
  if (fit) {
    j["allocator"] = {{"policy", fit->policy},
                      {"fits", fit->fits},
                      {"usable_bytes", fit->usable},
                      {"peak_live_bytes", fit->peak_live},
                      {"peak_reserved_bytes", fit->peak_reserved}};
  }
  j["runs"] = runs;
  return j;
}

RunnablePlan runnable_plan(const Plan& plan, const Graph& graph, const Hardware& hw, bool lay_out) {
  RunnablePlan out;
  out.plan = plan;
  // What to plan for next: the largest budget whose plan, with this one's
  // excess over its live peak (the layout's fragmentation, the allocator's
  // chunks), fits (0: none).
  const auto room = [](uint64_t cap, uint64_t used, uint64_t live) -> uint64_t {
    const uint64_t excess = used > live ? used - live : 0;
    return cap > excess ? cap - excess : 0;
  };
  uint64_t overshoot = kMaxBytes;
  if (lay_out) {
    out.laid = lay_out_plan(plan, graph, hw);
    if (out.laid->pinned) {
      out.plan = out.laid->plan;
      out.runs = true;
      return out;
    }
    if (out.laid->arena > plan.budget) {
      overshoot = out.laid->arena - plan.budget;
      out.target = room(plan.budget, out.laid->arena, out.laid->live_peak);
    }
  }
  out.fit = allocator_fit(graph, plan, hw);
  if (out.fit->fits) {
    // It runs; laid out is better still (Note [Plans laid out by default]):
    // what overshot is the layout's, for a plan for less.
    out.runs = true;
    out.overshoot = overshoot == kMaxBytes ? 0 : overshoot;
    return out;
  }
  if (out.fit->peak_reserved > out.fit->usable) {
    overshoot = std::min(overshoot, out.fit->peak_reserved - out.fit->usable);
    out.target =
        std::max(out.target, room(out.fit->usable, out.fit->peak_reserved, out.fit->peak_live));
  }
  out.overshoot = overshoot == kMaxBytes ? 0 : overshoot;
  return out;
}

bool RunnablePlan::settled() const { return laid ? laid->pinned : runs; }

namespace {

// How many times `memwall plan` plans again for a lower budget before it
// refuses.
constexpr int kReplans = 3;

// The budget to plan for next, after a plan made for `planned_for` did not
// settle, or nullopt when lowering it cannot help.
std::optional<uint64_t> next_budget(uint64_t planned_for, const RunnablePlan& r) {
  if (r.settled() || r.overshoot == 0) return std::nullopt;
  // At least what overshot less (and one 512-byte block), so that the loop
  // always moves; the target when it is lower.
  const uint64_t cut = std::max<uint64_t>(r.overshoot, 512);
  if (cut >= planned_for) return std::nullopt;
  const uint64_t next = std::min(planned_for - cut, r.target > 0 ? r.target : planned_for);
  if (next == 0) return std::nullopt;
  return next;
}

}  // namespace

RunnablePlan plan_until_it_runs(RunnablePlan first, uint64_t budget, std::string_view strategy,
                                const PlanFor& plan_for, const std::function<void()>& adopt,
                                uint64_t& planned_for) {
  RunnablePlan written = std::move(first);
  planned_for = 0;
  uint64_t lowered = budget;
  for (int i = 0; !written.settled() && i < kReplans; ++i) {
    const std::optional<uint64_t> next = next_budget(lowered, written);
    if (!next) break;
    std::optional<RunnablePlan> tried = plan_for(*next);
    if (!tried) break;
    lowered = *next;
    // A plan the allocator holds stays the one to write unless a plan for
    // less is laid out.
    if (tried->settled() || !written.runs) {
      adopt();
      planned_for = tried->runs ? lowered : 0;
      written = std::move(*tried);
    }
  }
  if (!written.runs) {
    fail("{}: no plan within the budget of {} runs there: {}{}", strategy, exact_bytes(budget),
         written.why_not(),
         lowered < budget ? fmt::format(" (planned again for down to {})", exact_bytes(lowered))
                          : std::string());
  }
  return written;
}

std::string planned_for_text(uint64_t planned_for) {
  return fmt::format(
      "{}: the plan for the whole budget did not fit it as it runs (laid out, or in the "
      "allocator's chunks), so memwall planned again for less (Note [Plans that run])",
      exact_bytes(planned_for));
}

}  // namespace memwall
