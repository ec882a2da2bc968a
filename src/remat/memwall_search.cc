// The op-level search of memwall's planner (memwall_search.h,
// docs/remat-memwall.md).
//
// Note [Drop items and their price]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Dropping a saved activation frees its bytes from the end of its forward
// uses until the backward regenerates it (in a forward-only program, across
// its largest gap: Note [Forward-only gaps] in checkpoints.cc), and costs
// the recompute of its producer plus whatever else that recompute needs
// that is not resident:
// buffers the forward freed (not saved for backward) are regenerated from
// their own producers, back to kept activations, parameters and inputs.
// An item's price is that closure's time under the cost model, computed
// as if every other saved activation were kept; its ratio price / bytes is
// what the search orders by. Closures are capped (kClosureCap ops): an item
// whose regeneration reaches further is never dropped, since its true cost
// is unbounded by anything the search can see.
//
// Note [Segmentations]
// ~~~~~~~~~~~~~~~~~~~~
// The forward's articulation points (candidate_checkpoints) cut the graph
// into segments the backward regenerates one at a time (Chen et al. 2016).
// Keeping every one of them bounds each regeneration by one segment; keeping
// every m-th merges m segments, which trades the boundaries' bytes for a
// larger regeneration peak. For each stride m in 1..ceil(sqrt(k)) + 1 the
// search keeps those boundaries and drops a prefix of the remaining items,
// cheapest per byte first, bisecting for the shortest prefix that fits the
// budget (the simulated peak falls, roughly monotonically, as the prefix
// grows). The stride with the shortest simulated iteration wins, and is
// refined.
//
// Note [Swaps]
// ~~~~~~~~~~~~
// Re-keeping only ever removes drops. Last, while time remains, the search
// exchanges one dropped item for one kept item that is cheaper to
// recompute (dearest dropped first, cheapest kept first per byte), keeping
// the first exchange that still fits and shortens the iteration, and starts
// over: a first-improvement local search, each try one evaluation.
//
// Note [Small graphs exactly]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With at most 14 items and ops x 2^items under 4M simulated steps, every
// keep set is simulated and the fastest that fits is exact for this family;
// bisection and refinement are for everything larger.
//
// Note [Re-keeping in groups]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A prefix overshoots: some of its items were needed only because the ratio
// order is blind to where the peak is. Refinement walks the dropped items,
// most expensive per byte first, and tries to keep a group of them; a group
// that still fits is kept as a whole, one that does not is halved and each
// half tried (group testing), down to single items. Each try is one
// builder run and one simulation, O(n); groups make the common cases (most
// fit, or most do not) take O(log) tries per group instead of one per item.
#include "memwall_search.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <deque>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/graph/graph.h"
#include "memwall/graph/versions.h"
#include "memwall/remat/checkpoints.h"
#include "memwall/sim/simulator.h"

namespace memwall::remat_detail {
namespace {

constexpr size_t kClosureCap = 256;
constexpr size_t kFirstGroup = 16;
constexpr size_t kExhaustiveItems = 14;
constexpr size_t kExhaustiveWork = size_t{1} << 22;  // ops x keep sets
constexpr double kInf = std::numeric_limits<double>::infinity();

// Per buffer: can the backward have it without regenerating it, if every
// saved activation is kept (Note [Drop items and their price]). A
// forward-only program's recomputes can have every input: the builder keeps
// one a recompute reads (Note [Forward-only gaps] in checkpoints.cc).
std::vector<uint8_t> resident_in_backward(const Graph& graph, const std::vector<BufferLife>& lives,
                                          const std::vector<uint8_t>& saved, bool backward) {
  std::vector<uint8_t> resident(saved.begin(), saved.end());
  for (const Buffer& b : graph.buffers) {
    if (!exists_before_first_op(b.kind)) continue;
    const OpId last = lives[b.id].last_use;
    resident[b.id] = is_persistent(b.kind) || !backward ||
                     (last != kNoOp && graph.ops[last].phase != Phase::kForward);
  }
  return resident;
}

}  // namespace

CheckpointSearch::CheckpointSearch(const Graph& graph, const Hardware& hardware, uint64_t budget)
    : graph_(graph), hardware_(hardware), budget_(budget) {
  const std::vector<uint8_t> droppable = droppable_activations(graph);
  const std::vector<uint8_t> saved = read_again_later(graph);
  const std::vector<BufferLife> lives = liveness(graph);
  const std::vector<uint8_t> resident =
      resident_in_backward(graph, lives, saved, has_backward(graph));
  std::vector<uint8_t> is_boundary(graph.buffers.size(), 0);
  for (const BufferId b : candidate_checkpoints(graph)) is_boundary[b] = 1;
  // A closure may replay the forward's gathers (Note [Gathers replay with
  // the forward]), priced at their collective's time.
  const std::vector<uint8_t> forward = forward_side_ops(graph);

  std::vector<uint32_t> seen(graph.ops.size(), 0);
  uint32_t stamp = 0;
  std::vector<BufferId> stack;
  for (const Op& op : graph.ops) {
    if (op.phase != Phase::kForward || !recomputable(graph, op)) continue;
    DropItem item{.op = op.id};
    for (const BufferId b : op.out) {
      if (!droppable[b]) continue;
      item.outputs.push_back(b);
      item.bytes += graph.buffers[b].bytes;
      item.boundary = item.boundary || is_boundary[b];
    }
    if (item.outputs.empty() || item.bytes == 0) continue;
    // The closure's price (Note [Drop items and their price]).
    ++stamp;
    seen[op.id] = stamp;
    double cost = op_time(hardware, graph, op);
    size_t visited = 1;
    stack.assign(op.in.begin(), op.in.end());
    while (!stack.empty() && cost < kInf) {
      const BufferId x = stack.back();
      stack.pop_back();
      if (resident[x]) continue;
      const OpId q = lives[x].producer;
      if (q == kNoOp || !recomputable(graph, graph.ops[q]) || !forward[q] ||
          ++visited > kClosureCap) {
        cost = kInf;
        break;
      }
      if (seen[q] == stamp) continue;
      seen[q] = stamp;
      cost += op_time(hardware, graph, graph.ops[q]);
      stack.insert(stack.end(), graph.ops[q].in.begin(), graph.ops[q].in.end());
    }
    if (cost == kInf) continue;
    item.cost = cost;
    items_.push_back(std::move(item));
  }
  by_ratio_.resize(items_.size());
  for (size_t i = 0; i < items_.size(); ++i) by_ratio_[i] = i;
  std::stable_sort(by_ratio_.begin(), by_ratio_.end(), [&](size_t a, size_t b) {
    return items_[a].cost / static_cast<double>(items_[a].bytes) <
           items_[b].cost / static_cast<double>(items_[b].bytes);
  });
  for (size_t i = 0; i < items_.size(); ++i) {
    if (items_[i].boundary) boundary_.push_back(i);
  }
}

std::vector<uint8_t> CheckpointSearch::keep_of(std::span<const uint8_t> dropped) const {
  std::vector<uint8_t> keep(graph_.buffers.size(), 1);
  for (size_t i = 0; i < items_.size(); ++i) {
    if (!dropped[i]) continue;
    for (const BufferId b : items_[i].outputs) keep[b] = 0;
  }
  return keep;
}

Judged judge(const Graph& graph, const Hardware& hardware, Plan plan, std::string how) {
  Judged judged;
  judged.how = std::move(how);
  const uint64_t budget = plan.budget;
  plan.budget = kMaxBytes;
  const SimResult sim = simulate(graph, plan, hardware, {.record_curves = false});
  plan.budget = budget;
  judged.plan = std::move(plan);
  judged.valid = sim.valid;
  judged.peak = device_peak(sim);
  judged.time = sim.iteration_time;
  return judged;
}

Judged CheckpointSearch::judge(std::span<const uint8_t> dropped, std::string how) {
  ++evaluations_;
  Plan plan;
  try {
    plan = plan_with_checkpoints(graph_, keep_of(dropped), hardware_.name, budget_);
  } catch (const Error&) {
    return Judged{};  // a keep set the builder cannot realize: never chosen
  }
  return remat_detail::judge(graph_, hardware_, std::move(plan), std::move(how));
}

// How a plan of `stride` was found, for messages. A graph without layer
// boundaries has one family, and no stride to speak of.
std::string CheckpointSearch::family(size_t stride) const {
  return remat_detail::stride_family(stride, boundary_.size());
}

size_t CheckpointSearch::strides() const {
  return static_cast<size_t>(std::ceil(std::sqrt(static_cast<double>(boundary_.size())))) + 1;
}

std::vector<uint8_t> CheckpointSearch::segment_kept(size_t stride) const {
  std::vector<uint8_t> kept(items_.size(), 0);
  for (size_t i = stride - 1; i < boundary_.size(); i += stride) kept[boundary_[i]] = 1;
  return kept;
}

Judged CheckpointSearch::bisect(std::span<const size_t> order, const std::string& family) {
  std::vector<uint8_t> dropped(items_.size(), 0);
  const auto prefix = [&](size_t k) {
    std::fill(dropped.begin(), dropped.end(), 0);
    for (size_t i = 0; i < k; ++i) dropped[order[i]] = 1;
  };
  const auto describe = [&](size_t k) {
    return fmt::format("{}: drops the {} cheapest of {} items per byte", family, k, order.size());
  };
  prefix(order.size());
  Judged best = judge(dropped, describe(order.size()));
  if (!best.fits(budget_)) return best;
  std::vector<uint8_t> best_dropped = dropped;
  size_t lo = 0;  // the caller knows keeping everything does not fit
  size_t hi = order.size();
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    prefix(mid);
    Judged judged = judge(dropped, describe(mid));
    if (judged.fits(budget_)) {
      hi = mid;
      best = std::move(judged);
      best_dropped = dropped;
    } else {
      lo = mid;
    }
  }
  if (best_dropped_.empty() || best.better_than(best_found_)) {
    best_found_ = best;
    best_dropped_ = best_dropped;
  }
  return best;
}

Judged CheckpointSearch::refine(Judged start, std::vector<uint8_t> dropped, const Stopwatch& clock,
                                double deadline) {
  std::vector<size_t> candidates;
  for (auto it = by_ratio_.rbegin(); it != by_ratio_.rend(); ++it) {
    if (dropped[*it]) candidates.push_back(*it);
  }
  std::deque<std::pair<size_t, size_t>> groups;  // [begin, end) into candidates
  for (size_t i = 0; i < candidates.size(); i += kFirstGroup) {
    groups.emplace_back(i, std::min(candidates.size(), i + kFirstGroup));
  }
  size_t rekept = 0;
  while (!groups.empty() && clock.seconds() < deadline) {
    const auto [begin, end] = groups.front();
    groups.pop_front();
    for (size_t i = begin; i < end; ++i) dropped[candidates[i]] = 0;
    Judged judged = judge(dropped, start.how);
    if (judged.fits(budget_) && judged.time <= start.time) {
      rekept += end - begin;
      start = std::move(judged);
      continue;
    }
    for (size_t i = begin; i < end; ++i) dropped[candidates[i]] = 1;
    if (end - begin > 1) {
      const size_t mid = begin + (end - begin) / 2;
      groups.emplace_front(mid, end);
      groups.emplace_front(begin, mid);
    }
  }
  if (rekept > 0) start.how += fmt::format(", then re-keeps {} of them", rekept);
  return swap(std::move(start), std::move(dropped), clock, deadline);
}

Judged CheckpointSearch::swap(Judged start, std::vector<uint8_t> dropped, const Stopwatch& clock,
                              double deadline) {
  size_t swaps = 0;
  bool improved = true;
  while (improved && clock.seconds() < deadline) {
    improved = false;
    // Dropped items, dearest first; kept ones, cheapest per byte first.
    std::vector<size_t> out, in;
    for (auto it = by_ratio_.rbegin(); it != by_ratio_.rend(); ++it) {
      if (dropped[*it]) out.push_back(*it);
    }
    for (const size_t i : by_ratio_) {
      if (!dropped[i]) in.push_back(i);
    }
    for (size_t a = 0; a < out.size() && !improved && clock.seconds() < deadline; ++a) {
      for (size_t b = 0; b < in.size() && !improved && clock.seconds() < deadline; ++b) {
        if (items_[in[b]].cost >= items_[out[a]].cost) continue;  // no cheaper
        dropped[out[a]] = 0;
        dropped[in[b]] = 1;
        Judged judged = judge(dropped, start.how);
        if (judged.fits(budget_) && judged.time < start.time) {
          start = std::move(judged);
          improved = true;
          ++swaps;
        } else {
          dropped[out[a]] = 1;
          dropped[in[b]] = 0;
        }
      }
    }
  }
  if (swaps > 0) start.how += fmt::format(", then swaps {} for cheaper ones", swaps);
  return start;
}

bool CheckpointSearch::small() const {
  return items_.size() <= kExhaustiveItems &&
         (graph_.ops.size() << items_.size()) <= kExhaustiveWork;
}

Judged CheckpointSearch::exhaustive(bool lowest_peak) {
  Judged best;
  std::vector<uint8_t> dropped(items_.size(), 0);
  for (uint32_t mask = 1; mask < (uint32_t{1} << items_.size()); ++mask) {
    for (size_t i = 0; i < items_.size(); ++i) dropped[i] = mask >> i & 1;
    Judged judged = judge(dropped, "");
    const bool better =
        lowest_peak ? judged.valid && (!best.valid || judged.peak < best.peak ||
                                       (judged.peak == best.peak && judged.time < best.time))
                    : judged.fits(budget_) && (!best.fits(budget_) || judged.better_than(best));
    if (better) {
      best = std::move(judged);
      best.how = fmt::format("op-level, exhaustive over {} items: drops {}", items_.size(),
                             std::popcount(mask));
    }
  }
  return best;
}

Judged CheckpointSearch::run(const Stopwatch& clock, double deadline) {
  // Small enough to try every keep set (Note [Small graphs exactly]).
  if (small()) return exhaustive();
  best_dropped_.clear();
  for (size_t stride = 1; stride <= strides(); ++stride) {
    // Past the deadline, stop once something fits: every stride's full drop
    // must be tried before giving up, since lowest() promises those peaks.
    if (stride > 1 && clock.seconds() >= deadline && !best_dropped_.empty()) break;
    const std::vector<uint8_t> kept = segment_kept(stride);
    std::vector<size_t> order;
    for (const size_t i : by_ratio_) {
      if (!kept[i]) order.push_back(i);
    }
    bisect(order, family(stride));
  }
  if (best_dropped_.empty()) return Judged{};  // nothing fits
  return refine(best_found_, best_dropped_, clock, deadline);
}

Judged CheckpointSearch::lowest() {
  Judged lowest;
  for (size_t stride = 1; stride <= strides(); ++stride) {
    const std::vector<uint8_t> kept = segment_kept(stride);
    std::vector<uint8_t> dropped(items_.size(), 0);
    for (size_t i = 0; i < items_.size(); ++i) dropped[i] = !kept[i];
    Judged judged = judge(dropped, family(stride) + ", all else dropped");
    if (judged.valid && (!lowest.valid || judged.peak < lowest.peak)) lowest = std::move(judged);
  }
  // Dropping more does not always lower the peak (a recompute can bring a
  // dropped buffer back early), so on small graphs every keep set counts.
  if (small()) {
    Judged judged = exhaustive(/*lowest_peak=*/true);
    if (judged.valid && (!lowest.valid || judged.peak < lowest.peak)) lowest = std::move(judged);
  }
  return lowest;
}

}  // namespace memwall::remat_detail

namespace memwall::remat_detail {

std::string stride_family(size_t stride, size_t boundaries) {
  if (boundaries == 0) return "op-level";
  const size_t kept = stride == 0 || stride > boundaries ? 0 : boundaries / stride;
  if (kept == 0) return fmt::format("op-level, none of {} boundaries kept", boundaries);
  if (stride == 1) return fmt::format("op-level, all {} boundaries kept", boundaries);
  return fmt::format("op-level, {} of {} boundaries kept (one in {})", kept, boundaries, stride);
}

}  // namespace memwall::remat_detail
