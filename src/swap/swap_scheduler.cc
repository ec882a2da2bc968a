// The swap scheduler (activations.h, docs/swap-scheduler.md).
//
// Note [Swap scheduling]
// ~~~~~~~~~~~~~~~~~~~~~~
// Given evictions (a buffer, its gap after op a until op u, swap or
// recompute, a tier), the scheduler decides where each swap's transfers go
// in the plan; plan_with_evictions then emits them and the simulator judges.
// The simulator (Note [Simulation model]) fixes the rules it plays by:
//
// - Swap-outs. A swap_out after op a issues at a's start, runs on the D2H
//   engine in plan order and gives the device memory back when the copy ends.
//   The compute stream never waits for a swap-out, so the earliest placement
//   is the best one: right after a, the last use before the gap (the plan
//   cannot drop the device copy before that use). The D2H queue is FIFO in
//   forward order; a backlog shows up as memory held in flight, which the
//   simulation below counts.
// - Prefetches. A swap_in after op p issues at p's start: it takes its
//   device memory then, starts when the H2D engine is free and its host copy
//   exists, and op u waits for it to arrive. The later p, the less memory;
//   the earlier p, the more compute the transfer hides under.
//
// So the scheduler places every prefetch as early as memory allows:
//
// 1. Just in time. Every prefetch after op u - 1 (the latest point, the
//    least memory). Simulated without a limit: if its peak is over the
//    budget, no placement of these evictions fits (`fits` = false).
//    Otherwise its run gives, per op j, the start S[j] of j's compute and the
//    most device bytes D[j] held from S[j] to the next compute's start, in
//    flight included; the headroom is H[j] = budget - D[j].
// 2. Memory pass. Each prefetch starts at its earliest point (the eviction's
//    prefetch_after, by default a) and adds its bytes to ops p..u-2 (at
//    u - 1 it is in D already; one issued while its swap-out is still in
//    flight holds a second copy, as the simulator has it). Sweeping j forward, while the prefetches
//    holding memory at j exceed H[j], the one needed last (largest u; then
//    the largest) moves to p = j + 1. Prefetches only ever move later, and
//    the one moved is the one whose transfer has the most time left.
// 3. Check and repair. The plan is simulated. Moving prefetches earlier
//    shortens stalls, so ops start earlier and swap-outs still in flight
//    overlap more of them: the estimate can be off. Where the simulation is
//    over the budget at op j (or at the peak's op), H[j] shrinks by the
//    excess and step 2 runs again; prefetches only move later, so this ends,
//    and when a round moves nothing (or the time limit passes) the
//    just-in-time placement, which fits, is the answer.
//
// The FIFO order of the H2D engine is the order of the prefetches in the
// plan: by issue point, then by the op needing them first.
#include <algorithm>
#include <limits>
#include <set>
#include <tuple>
#include <utility>

#include "memwall/base/error.h"
#include "memwall/base/stopwatch.h"
#include "memwall/swap/activations.h"

namespace memwall {
namespace {

constexpr size_t kDeviceTier = static_cast<size_t>(Tier::kDevice);

Plan build(const Graph& graph, const Hardware& hardware, uint64_t budget,
           std::span<const Eviction> evictions) {
  return plan_with_evictions(graph, evictions, hardware.name, budget);
}

bool fits(const SimResult& sim, uint64_t budget) { return sim.valid && device_peak(sim) <= budget; }

// Per op: the start of its compute and the most device bytes held from then
// to the next compute's start (see the Note, step 1).
struct OpMemory {
  std::vector<double> start;
  std::vector<uint64_t> bytes;
};

OpMemory op_memory(const Graph& graph, const Plan& plan, const SimResult& sim) {
  const size_t n = graph.ops.size();
  OpMemory m{std::vector<double>(n, 0), std::vector<uint64_t>(n, 0)};
  for (const Span& span : sim.timeline) {
    const Step& step = plan.steps[span.step];
    if (span.resource == Resource::kCompute && step.kind == StepKind::kCompute) {
      m.start[step.op] = span.start;
    }
  }
  // Ops that never ran (an invalid plan) keep the previous start.
  for (size_t i = 1; i < n; ++i) m.start[i] = std::max(m.start[i], m.start[i - 1]);
  const std::vector<MemoryPoint>& curve = sim.curves[kDeviceTier];
  size_t k = 0;
  uint64_t current = 0;  // device bytes at the latest curve point passed
  for (size_t i = 0; i < n; ++i) {
    const double end = i + 1 < n ? m.start[i + 1] : std::numeric_limits<double>::infinity();
    while (k < curve.size() && curve[k].time <= m.start[i]) current = curve[k++].bytes;
    uint64_t most = current;
    for (size_t x = k; x < curve.size() && curve[x].time < end; ++x) {
      most = std::max(most, curve[x].bytes);
    }
    m.bytes[i] = most;
  }
  // The peak may be a transient the curve merged away: charge it to its op.
  const double peak_time = sim.peak_time[kDeviceTier];
  const auto it = std::upper_bound(m.start.begin(), m.start.end(), peak_time);
  if (it != m.start.begin()) {
    const auto j = static_cast<size_t>(it - m.start.begin() - 1);
    m.bytes[j] = std::max(m.bytes[j], device_peak(sim));
  }
  return m;
}

class Scheduler {
 public:
  Scheduler(const Graph& graph, const Hardware& hardware, uint64_t budget,
            std::span<const Eviction> evictions, const SwapScheduleOptions& options)
      : graph_(graph),
        hardware_(hardware),
        budget_(budget),
        options_(options),
        evictions_(evictions.begin(), evictions.end()) {
    for (size_t k = 0; k < evictions_.size(); ++k) {
      Eviction& e = evictions_[k];
      if (e.how != Eviction::How::kSwap) continue;
      if (e.to == Tier::kDevice) fail("swap: an eviction swaps buffer {} to the device", e.buf);
      swaps_.push_back(k);
      // Out-of-range gaps are plan_with_evictions' to report; keep the
      // earliest point inside [after, before - 1] when the gap is sane.
      const OpId earliest = e.prefetch_after == kNoOp ? e.after : e.prefetch_after;
      earliest_.push_back(std::clamp(earliest, e.after, std::max(e.after, e.before - 1)));
    }
  }

  SwapSchedule run() {
    const Stopwatch clock;
    // 1. Just in time.
    std::vector<OpId> jit(swaps_.size());
    for (size_t s = 0; s < swaps_.size(); ++s) jit[s] = evictions_[swaps_[s]].before - 1;
    SwapSchedule best = make(jit, /*timeline=*/true);
    best.just_in_time_peak = device_peak(best.sim);
    if (!best.fits || swaps_.empty()) return strip(std::move(best));
    const OpMemory base = op_memory(graph_, best.plan, best.sim);
    headroom_.resize(graph_.ops.size());
    for (size_t j = 0; j < headroom_.size(); ++j) {
      headroom_[j] = base.bytes[j] >= budget_ ? 0 : budget_ - base.bytes[j];
    }
    // 2 and 3. Memory pass, check, repair.
    std::vector<OpId> previous;
    size_t repairs = 0;
    while (true) {
      std::vector<OpId> points = memory_pass();
      if (points == previous || points == jit) break;
      SwapSchedule candidate = make(points, /*timeline=*/true);
      if (candidate.fits) {
        candidate.just_in_time_peak = best.just_in_time_peak;
        candidate.repairs = repairs;
        return strip(std::move(candidate));
      }
      if (!candidate.sim.valid || clock.seconds() > options_.time_limit) break;
      const OpMemory now = op_memory(graph_, candidate.plan, candidate.sim);
      for (size_t j = 0; j < headroom_.size(); ++j) {
        if (now.bytes[j] <= budget_) continue;
        const uint64_t excess = now.bytes[j] - budget_;
        headroom_[j] = headroom_[j] > excess ? headroom_[j] - excess : 0;
      }
      previous = std::move(points);
      ++repairs;
    }
    best.repairs = repairs;
    return strip(std::move(best));
  }

 private:
  // Step 2 of the Note: prefetch points, one per swap.
  std::vector<OpId> memory_pass() const {
    const size_t n = graph_.ops.size();
    std::vector<OpId> points(earliest_);
    std::vector<std::vector<size_t>> starting(n);
    for (size_t s = 0; s < swaps_.size(); ++s) starting[points[s]].push_back(s);
    // Prefetches holding memory, by (op needing it, bytes, index): the last
    // one is moved first.
    std::set<std::tuple<OpId, uint64_t, size_t>> held;
    uint64_t held_bytes = 0;
    for (size_t j = 0; j < n; ++j) {
      for (const size_t s : starting[j]) {
        const Eviction& e = evictions_[swaps_[s]];
        if (static_cast<OpId>(j) >= e.before - 1) continue;  // just in time: in D already
        const uint64_t bytes = graph_.buffers[e.buf].bytes;
        held.emplace(e.before, bytes, s);
        held_bytes += bytes;
      }
      // Those whose just-in-time point is j are counted in D from here on.
      while (!held.empty() && std::get<0>(*held.begin()) - 1 <= static_cast<OpId>(j)) {
        held_bytes -= std::get<1>(*held.begin());
        held.erase(held.begin());
      }
      while (held_bytes > headroom_[j]) {
        const auto last = std::prev(held.end());
        const auto [before, bytes, s] = *last;
        held.erase(last);
        held_bytes -= bytes;
        points[s] = static_cast<OpId>(j + 1);
        starting[j + 1].push_back(s);
      }
    }
    return points;
  }

  SwapSchedule make(std::span<const OpId> points, bool timeline) const {
    SwapSchedule out;
    out.evictions = evictions_;
    for (size_t s = 0; s < swaps_.size(); ++s) {
      out.evictions[swaps_[s]].prefetch_after = points[s];
    }
    // The builder issues the prefetches of one op in the order given.
    std::stable_sort(out.evictions.begin(), out.evictions.end(),
                     [](const Eviction& x, const Eviction& y) {
                       const bool xs = x.how == Eviction::How::kSwap;
                       const bool ys = y.how == Eviction::How::kSwap;
                       if (xs != ys) return ys;  // recomputes first
                       if (!xs) return false;
                       return std::tie(x.prefetch_after, x.before, x.buf) <
                              std::tie(y.prefetch_after, y.before, y.buf);
                     });
    out.plan = build(graph_, hardware_, budget_, out.evictions);
    out.sim = simulate_unlimited(graph_, hardware_, out.plan, timeline);
    out.fits = fits(out.sim, budget_);
    return out;
  }

  // The returned simulation carries no timeline or curves (callers want figures).
  static SwapSchedule strip(SwapSchedule schedule) {
    schedule.sim.timeline.clear();
    schedule.sim.timeline.shrink_to_fit();
    for (auto& curve : schedule.sim.curves) {
      curve.clear();
      curve.shrink_to_fit();
    }
    return schedule;
  }

  const Graph& graph_;
  const Hardware& hardware_;
  const uint64_t budget_;
  const SwapScheduleOptions options_;
  std::vector<Eviction> evictions_;
  std::vector<size_t> swaps_;       // indices of the swap evictions
  std::vector<OpId> earliest_;      // per swap: its earliest prefetch point
  std::vector<uint64_t> headroom_;  // per op: H[j] of the Note
};

}  // namespace

SwapSchedule schedule_swaps(const Graph& graph, const Hardware& hardware, uint64_t budget,
                            std::span<const Eviction> evictions,
                            const SwapScheduleOptions& options) {
  return Scheduler(graph, hardware, budget, evictions, options).run();
}

}  // namespace memwall
