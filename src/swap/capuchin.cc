// Capuchin (Peng et al., "Capuchin: Tensor-based GPU Memory Management for
// Deep Learning", ASPLOS 2020), on memwall's op graphs
// (docs/swap-capuchin.md).
//
// Note [Capuchin's hybrid policy]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Capuchin measures one iteration, records each tensor's accesses with
// their times (the access timeline), and then chooses, per tensor, whether
// to evict it across its longest access interval by swapping or by
// recomputation. Here:
//
// - Timeline. The keep-all plan, simulated, gives every op's start and end.
// - Candidates. Each activation saved for backward (in a forward-only
//   program, read again after a gap: read_again_later), evicted across the
//   largest gap between consecutive uses (largest_gap); after Capuchin,
//   only those whose gap spans the current peak help.
// - Free time. For a candidate swapped out after access a and needed again
//   by access u: its swap-out starts once it exists and a has started, at
//   the first idle stretch of the D2H engine; its swap-in must end by u's
//   start, at the latest idle stretch of the H2D engine after the swap-out
//   ends. FT = swap-in start - swap-out end. The engines hold the transfers
//   already chosen, so overlapping transfers compete for them. With no such
//   stretch, FT < 0 and the swap's overhead is how late the earliest
//   possible swap-in ends after u's start.
// - Selection, per round. Simulate the chosen evictions with prefetches just
//   in time (Note [Swap scheduling], step 1); if the device peak fits, stop.
//   Otherwise the peak, at op j, must drop by peak - budget. Among the
//   candidates absent at j (a < j < u - 1; a swap only when its swap-out is
//   done by j's start, since the device copy is held until then): first the
//   largest FT while FT >= 0 (a swap that hides costs nothing); then, while
//   still short, the choice with the most memory saved per second of
//   overhead: a swap (bytes / lateness) or a recompute (bytes / recompute
//   time, Capuchin's MSPS; see Note [Recompute chains]).
// - Then the swap scheduler places the prefetches of the final set and the
//   simulator checks the plan. A round that finds nothing to evict, or the
//   time limit, ends in an Error saying how far over the budget it is.
//
// Note [Host, then NVMe]
// ~~~~~~~~~~~~~~~~~~~~~~~
// With SwapOptions::host_swap_bytes set (the automatic planner passes the
// host memory its model states leave free), the destination is chosen per
// tensor: a swap goes to the host while the chosen host swaps fit in that
// many bytes (counted whole, as if all were on the host at once), and to
// NVMe after that, priced with the NVMe legs. So one plan can keep some
// activations, swap some to the host and some to NVMe, and recompute
// others.
//
// Note [Recompute chains]
// ~~~~~~~~~~~~~~~~~~~~~~~
// Capuchin recomputes a tensor from the nearest ancestors still in memory
// and charges the whole chain's time to it (its MSPS update): inputs freed
// by the default schedule or evicted by an earlier choice are regenerated
// first (a swapped one costs its swap-in), at most kMaxChain ops deep. On
// memwall's plans what a recompute brings back stays until its next use
// (Note [Applying evictions]), so an evicted buffer that a chosen recompute
// reads inside its gap is back on the device from that recompute on: its
// eviction no longer spans ops after it, and it is not a candidate there.
//
// Note [Undoing a round]
// ~~~~~~~~~~~~~~~~~~~~~~
// The estimates above can be wrong in ways only the simulation shows (a
// recompute chain regenerating large buffers at the point of use, where the
// new peak then sits). When a round's choices do not lower the simulated
// peak, they are undone and never made again (each candidate keeps the
// other method), and the round is redone at the same op. Every undo bans at
// least one choice, so the loop ends.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "memwall/base/deadline.h"
#include "memwall/graph/describe.h"
#include "memwall/graph/graph.h"
#include "memwall/graph/versions.h"
#include "swap_common.h"

namespace memwall {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr size_t kDeviceTierIndex = static_cast<size_t>(Tier::kDevice);
// Longest chain of missing inputs a recompute may regenerate.
constexpr int kMaxChain = 8;

// The busy stretches of one copy engine, from the transfers chosen so far
// (disjoint: each is placed in an idle stretch).
class Engine {
 public:
  // Start of the first idle stretch of `duration` at or after `from`.
  double first_fit(double from, double duration) const {
    double t = from;
    auto it = busy_.upper_bound(t);
    if (it != busy_.begin()) t = std::max(t, std::prev(it)->second);
    for (; it != busy_.end() && it->first < t + duration; ++it) t = std::max(t, it->second);
    return t;
  }
  // Start of the latest idle stretch of `duration` ending by `deadline` and
  // starting at or after `from`.
  std::optional<double> last_fit(double from, double deadline, double duration) const {
    double end = deadline;
    auto it = busy_.lower_bound(end);
    while (it != busy_.begin()) {
      const auto prev = std::prev(it);
      if (prev->second <= end - duration) break;
      end = std::min(end, prev->first);
      it = prev;
    }
    if (end - duration < from) return std::nullopt;
    return end - duration;
  }
  void add(double start, double duration) {
    if (duration > 0) busy_.emplace(start, start + duration);
  }

 private:
  std::map<double, double> busy_;  // start -> end
};

struct Candidate {
  BufferId buf = -1;
  OpId after = kNoOp;
  OpId before = kNoOp;
  uint64_t bytes = 0;
  std::optional<Eviction::How> chosen;
  Tier tier = Tier::kHost;  // where a chosen swap goes
};

// Where a swap's transfers would go with the engines as they are.
struct SwapFit {
  Tier tier = Tier::kHost;  // the swap's destination (Note [Host, then NVMe])
  double out_start = 0, out_end = 0;
  double in_start = 0;
  double free_time = 0;  // FT; negative: the swap-in ends this much after the access
};

struct Choice {
  size_t candidate = 0;
  Eviction::How how = Eviction::How::kSwap;
  SwapFit fit;  // swaps: where its transfers went
};

// One selection round: the choices from first_choice on lower `peak`, at `op`.
struct Round {
  size_t first_choice = 0;
  OpId op = kNoOp;
  uint64_t peak = 0;
};

class Capuchin {
 public:
  Capuchin(const Graph& graph, const Hardware& hardware, uint64_t budget,
           const SwapOptions& options)
      : graph_(graph),
        hw_(hardware),
        rank_hw_(rank_share(hardware, graph_gpus(graph))),
        budget_(budget),
        options_(options),
        deadline_(work_deadline(options.time_limit)),
        lives_(liveness(graph)),
        chosen_of_(graph.buffers.size(), -1),
        recompute_users_(graph.buffers.size()) {
    for (const Op& op : graph.ops) op_time_.push_back(op_time(hardware, graph, op));
  }

  SwapResult run() {
    const swap_detail::Stopwatch clock;
    swap_detail::check_tier(options_.tier, "capuchin");
    measure();
    find_candidates();
    size_t rounds = 0;
    uint64_t lowest = std::numeric_limits<uint64_t>::max();
    std::optional<Round> last;
    while (true) {
      const std::vector<Eviction> evictions = chosen_evictions();
      const Plan plan = plan_with_evictions(graph_, evictions, hw_.name, kMaxBytes);
      const SimResult sim =
          simulate(graph_, plan, hw_, {.record_timeline = true, .record_curves = false});
      if (!sim.valid) fail("capuchin: the simulator rejects the plan: {}", sim.reason);
      Round round{choices_.size(), kNoOp, sim.peak_bytes[kDeviceTierIndex]};
      lowest = std::min(lowest, round.peak);
      if (round.peak <= budget_) break;
      if (last && round.peak >= last->peak) {
        // The last round did not lower the peak (Note [Undoing a round]).
        for (size_t k = last->first_choice; k < choices_.size(); ++k) {
          banned_[choices_[k].candidate] |= bit(choices_[k].how);
        }
        replay(last->first_choice);
        round = *last;
      } else {
        round.op = peak_op(plan, sim);
      }
      const auto out_of_time = [&] {
        throw BudgetError(
            fmt::format("capuchin: time limit of {} s reached; the lowest device peak it reached "
                        "is {} bytes, over the budget of {} by {}",
                        options_.time_limit, lowest, budget_, lowest - budget_),
            lowest);
      };
      if (deadline_.passed()) out_of_time();
      if (!select(round.op, round.peak - budget_)) {
        if (deadline_.passed()) out_of_time();
        throw BudgetError(
            fmt::format("capuchin: the lowest device peak it reaches is {} bytes, over the budget "
                        "of {} by {}; nothing left spanning the peak at {} lowers it",
                        lowest, budget_, lowest - budget_, detail::op_label(graph_, round.op)),
            lowest);
      }
      last = round;
      ++rounds;
    }
    const std::vector<Eviction> evictions = chosen_evictions();
    const SwapSchedule schedule =
        schedule_swaps(graph_, hw_, budget_, evictions, {.time_limit = deadline_.left()});
    size_t to_host = 0, to_nvme = 0;
    for (const Eviction& e : evictions) {
      if (e.how != Eviction::How::kSwap) continue;
      ++(e.to == Tier::kHost ? to_host : to_nvme);
    }
    const std::string note =
        evictions.empty()
            ? std::string("fits without evictions")
            : fmt::format("{} swapped to host, {} to nvme, {} recomputed, in {} rounds", to_host,
                          to_nvme, evictions.size() - to_host - to_nvme, rounds);
    return swap_detail::finish(graph_, hw_, budget_, schedule, "capuchin", note, clock);
  }

 private:
  // The access timeline: every op's start and end in the keep-all run.
  void measure() {
    const Plan plan = default_plan(graph_, hw_.name, kMaxBytes);
    const SimResult sim =
        simulate(graph_, plan, hw_, {.record_timeline = true, .record_curves = false});
    start_.assign(graph_.ops.size(), 0);
    end_.assign(graph_.ops.size(), 0);
    for (const Span& span : sim.timeline) {
      const Step& step = plan.steps[span.step];
      if (span.resource != Resource::kCompute) continue;
      start_[step.op] = span.start;
      end_[step.op] = span.end;
    }
  }

  void find_candidates() {
    const std::vector<uint8_t> saved = read_again_later(graph_);
    const BufferUses uses(graph_);
    for (const Buffer& b : graph_.buffers) {
      if (!saved[b.id]) continue;
      const std::optional<Eviction> gap = largest_gap(uses, b.id, 2);
      if (!gap) continue;
      candidates_.push_back({b.id, gap->after, gap->before, b.bytes, std::nullopt});
    }
    banned_.assign(candidates_.size(), 0);
  }

  std::vector<Eviction> chosen_evictions() const {
    std::vector<Eviction> out;
    for (const Candidate& c : candidates_) {
      if (!c.chosen) continue;
      out.push_back(
          {.buf = c.buf, .after = c.after, .before = c.before, .how = *c.chosen, .to = c.tier});
    }
    return out;
  }

  // The op whose compute was running when the device peak was reached.
  OpId peak_op(const Plan& plan, const SimResult& sim) const {
    const double when = sim.peak_time[kDeviceTierIndex];
    OpId op = 0;
    for (const Span& span : sim.timeline) {
      const Step& step = plan.steps[span.step];
      if (span.resource != Resource::kCompute || step.kind != StepKind::kCompute) continue;
      if (span.start > when) break;
      op = step.op;
    }
    return op;
  }

  double out_time(uint64_t bytes, Tier tier) const {
    double t = d2h_time(rank_hw_, bytes);
    if (tier == Tier::kNvme) t += static_cast<double>(bytes) / rank_hw_.nvme_write_bandwidth;
    return t;
  }
  double in_time(uint64_t bytes, Tier tier) const {
    double t = h2d_time(rank_hw_, bytes);
    if (tier == Tier::kNvme) t += static_cast<double>(bytes) / rank_hw_.nvme_read_bandwidth;
    return t;
  }
  // Where a swap of c would go now (Note [Host, then NVMe]).
  Tier tier_for(const Candidate& c) const {
    if (options_.tier != Tier::kHost || !options_.host_swap_bytes) return options_.tier;
    return host_swapped_ + c.bytes <= *options_.host_swap_bytes ? Tier::kHost : Tier::kNvme;
  }

  SwapFit swap_fit(const Candidate& c) const {
    SwapFit fit;
    const OpId producer = lives_[c.buf].producer;
    const double ready = std::max(start_[c.after], producer == kNoOp ? 0 : end_[producer]);
    fit.tier = tier_for(c);
    const double out = out_time(c.bytes, fit.tier), in = in_time(c.bytes, fit.tier);
    fit.out_start = d2h_.first_fit(ready, out);
    fit.out_end = fit.out_start + out;
    const double deadline = start_[c.before];
    if (const std::optional<double> in_start = h2d_.last_fit(fit.out_end, deadline, in)) {
      fit.in_start = *in_start;
      fit.free_time = *in_start - fit.out_end;
    } else {
      fit.in_start = h2d_.first_fit(fit.out_end, in);
      fit.free_time = -std::max(fit.in_start + in - deadline, 1e-12);
    }
    return fit;
  }

  static uint8_t bit(Eviction::How how) { return how == Eviction::How::kSwap ? 1 : 2; }
  bool banned(const Candidate& c, Eviction::How how) const {
    return (banned_[static_cast<size_t>(&c - candidates_.data())] & bit(how)) != 0;
  }

  void choose_swap(Candidate& c, const SwapFit& fit) {
    choices_.push_back({static_cast<size_t>(&c - candidates_.data()), Eviction::How::kSwap, fit});
    apply_swap(c, fit);
  }
  void choose_recompute(Candidate& c) {
    choices_.push_back(
        {static_cast<size_t>(&c - candidates_.data()), Eviction::How::kRecompute, {}});
    apply_recompute(c);
  }
  // Forgets every choice from the n-th on.
  void replay(size_t n) {
    choices_.resize(n);
    for (Candidate& c : candidates_) c.chosen.reset();
    std::fill(chosen_of_.begin(), chosen_of_.end(), -1);
    for (auto& users : recompute_users_) users.clear();
    d2h_ = {};
    h2d_ = {};
    host_swapped_ = 0;
    for (const Choice& choice : choices_) {
      Candidate& c = candidates_[choice.candidate];
      if (choice.how == Eviction::How::kSwap) {
        apply_swap(c, choice.fit);
      } else {
        apply_recompute(c);
      }
    }
  }

  void apply_swap(Candidate& c, const SwapFit& fit) {
    c.chosen = Eviction::How::kSwap;
    c.tier = fit.tier;
    if (fit.tier == Tier::kHost) host_swapped_ += c.bytes;
    chosen_of_[c.buf] = static_cast<int32_t>(&c - candidates_.data());
    d2h_.add(fit.out_start, fit.out_end - fit.out_start);
    h2d_.add(fit.in_start, in_time(c.bytes, fit.tier));
  }
  void apply_recompute(Candidate& c) {
    c.chosen = Eviction::How::kRecompute;
    chosen_of_[c.buf] = static_cast<int32_t>(&c - candidates_.data());
    std::vector<BufferId> touched;
    recompute_time(c, &touched);
    for (const BufferId x : touched) {
      if (x != c.buf) recompute_users_[x].push_back(c.before);
    }
  }

  // Whether x is off the device when op u needs it: evicted across u by a
  // choice so far, or freed by the default schedule before u.
  bool absent(BufferId x, OpId u) const {
    if (is_persistent(graph_.buffers[x].kind)) return false;
    const int32_t k = chosen_of_[x];
    if (k >= 0 && candidates_[k].after < u && u <= candidates_[k].before) return true;
    return lives_[x].free_op != kNoOp && lives_[x].free_op < u;
  }

  // Seconds to recompute c before its next use (kInf when impossible),
  // regenerating first what its producer reads and is gone by then
  // (Capuchin's MSPS update). `touched` gets every buffer the recompute
  // reads or brings back.
  double recompute_time(const Candidate& c, std::vector<BufferId>* touched = nullptr) const {
    return regenerate_time(c.buf, c.before, 0, touched);
  }
  double regenerate_time(BufferId b, OpId u, int depth, std::vector<BufferId>* touched) const {
    const OpId producer = lives_[b].producer;
    if (producer == kNoOp || depth > kMaxChain) return kInf;
    const Op& op = graph_.ops[producer];
    if (!recomputable(graph_, op)) return kInf;
    if (touched) touched->insert(touched->end(), op.out.begin(), op.out.end());
    double t = op_time_[producer];
    for (const BufferId x : op.in) {
      if (touched) touched->push_back(x);
      if (!absent(x, u)) continue;
      const int32_t k = chosen_of_[x];
      if (k >= 0 && candidates_[k].chosen == Eviction::How::kSwap) {
        t += in_time(graph_.buffers[x].bytes, candidates_[k].tier);
      } else {
        t += regenerate_time(x, u, depth + 1, touched);
      }
      if (t == kInf) return kInf;
    }
    return t;
  }

  // When c's buffer is back on the device: its next use, or earlier when a
  // chosen recompute reads it (or brings it back) inside its gap.
  OpId back_at(const Candidate& c) const {
    OpId back = c.before;
    for (const OpId user : recompute_users_[c.buf]) {
      if (c.after < user && user < back) back = user;
    }
    return back;
  }

  // One round of the Note's selection at peak op j; false when nothing
  // spanning j can be evicted.
  bool select(OpId j, uint64_t need) {
    std::vector<Candidate*> spanning;
    for (Candidate& c : candidates_) {
      if (!c.chosen && c.after < j && j < back_at(c) - 1) spanning.push_back(&c);
    }
    // A swap lowers the peak only if its copy has left the device by then.
    const auto swap_helps = [&](const SwapFit& fit) { return fit.out_end <= start_[j]; };
    uint64_t saved = 0;
    bool any = false;
    const auto done = [&] { return saved >= need; };
    const auto take = [&](Candidate* c) {
      saved += c->bytes;
      any = true;
      spanning.erase(std::find(spanning.begin(), spanning.end(), c));
      std::erase_if(spanning, [&](const Candidate* x) { return j >= back_at(*x) - 1; });
    };
    // Swaps that hide under compute, largest free time first.
    while (!done() && !deadline_.passed()) {
      Candidate* best = nullptr;
      SwapFit best_fit;
      for (Candidate* c : spanning) {
        if (banned(*c, Eviction::How::kSwap)) continue;
        const SwapFit fit = swap_fit(*c);
        if (fit.free_time < 0 || !swap_helps(fit)) continue;
        if (!best || fit.free_time > best_fit.free_time) {
          best = c;
          best_fit = fit;
        }
      }
      if (!best) break;
      choose_swap(*best, best_fit);
      take(best);
    }
    // The rest by memory saved per second of overhead.
    while (!done() && !deadline_.passed()) {
      Candidate* best = nullptr;
      bool best_swap = false;
      SwapFit best_fit;
      double best_score = -1;
      for (Candidate* c : spanning) {
        const auto bytes = static_cast<double>(c->bytes);
        const SwapFit fit = swap_fit(*c);
        if (!banned(*c, Eviction::How::kSwap) && swap_helps(fit)) {
          const double score = bytes / std::max(-fit.free_time, 1e-12);
          if (score > best_score) {
            best = c;
            best_swap = true;
            best_fit = fit;
            best_score = score;
          }
        }
        if (!options_.allow_recompute || banned(*c, Eviction::How::kRecompute)) continue;
        const double t = recompute_time(*c);
        if (t < kInf) {
          const double score = bytes / std::max(t, 1e-12);
          if (score > best_score) {
            best = c;
            best_swap = false;
            best_score = score;
          }
        }
      }
      if (!best) break;
      if (best_swap) {
        choose_swap(*best, best_fit);
      } else {
        choose_recompute(*best);
      }
      take(best);
    }
    return any;
  }

  const Graph& graph_;
  const Hardware& hw_;      // the node's profile, for the simulator
  const Hardware rank_hw_;  // the rank's share of it, for swap-time estimates
  const uint64_t budget_;
  const SwapOptions options_;
  // Checked per round and per choice: a choice scans every candidate, and a
  // round of a thousand choices took 2.6 s on Mixtral's offload graph.
  const Deadline deadline_;
  const std::vector<BufferLife> lives_;
  std::vector<double> op_time_;
  std::vector<double> start_, end_;  // the access timeline
  std::vector<Candidate> candidates_;
  std::vector<Choice> choices_;     // in the order made
  std::vector<uint8_t> banned_;     // per candidate: bit(how) of the choices undone
  std::vector<int32_t> chosen_of_;  // per buffer: its chosen candidate, or -1
  // Per buffer: the ops before which a chosen recompute reads or regenerates it.
  std::vector<std::vector<OpId>> recompute_users_;
  Engine d2h_, h2d_;
  uint64_t host_swapped_ = 0;  // bytes of the chosen swaps to the host
};

}  // namespace

SwapResult plan_capuchin(const Graph& graph, const Hardware& hardware, uint64_t budget,
                         const SwapOptions& options) {
  return Capuchin(graph, hardware, budget, options).run();
}

}  // namespace memwall
