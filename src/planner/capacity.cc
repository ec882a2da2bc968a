// Capacity searches: the batch with the best throughput (or the largest),
// the largest model of a family.
//
// Note [Batch search]
// ~~~~~~~~~~~~~~~~~~~
// Throughput (batch / iteration time) is not monotone in the batch. While
// every activation stays on the device it rises as fixed costs (model-state
// traffic, launch latency) spread over more samples; once memory binds,
// recomputation or swapping grows faster than the batch and it falls, and
// a different model-state configuration can make it jump. The search takes
// throughput to be unimodal over the batches that plan (and a batch that
// does not plan to be worth nothing):
//   1. doubling from 1 while each doubled batch plans and is faster per
//      sample than the last; the first that fails or is no faster ends it;
//   2. bracketed refinement: with B the best batch so far and L < B < H its
//      nearest tried neighbours (H the one that ended the doubling, or B
//      itself at the batch limit), probe the middle of the wider of (L, B)
//      and (B, H); a faster probe becomes B and the old B a bracket end, a
//      slower one (or one that does not plan) becomes the bracket end on
//      its side. It stops when no untried batch is left inside (L, H).
// Each probe shrinks the bracket by a quarter at least, so the search plans
// O(log batch) batches. Under unimodality it returns the best throughput
// over all batches up to the limit; otherwise the best of those it tried
// (tests/planner check it against every batch on small models). Of equal
// throughputs the batch tried first is kept. The time limit is checked
// before each plan but the first; when it runs out, the best so far is
// returned, marked cut short. Only the best plan so far is held, since a
// large model's plans take gigabytes.
//
// --largest keeps the earlier search for the largest batch that plans:
// doubling until one fails, then bisection (plans get harder with the
// batch, an assumption, not a proof, for heuristic planners).
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/base/stopwatch.h"
#include "memwall/planner/planner.h"

namespace memwall {
namespace {

// plan_auto of the model at this batch; nullopt and why when nothing fits.
std::optional<AutoPlan> try_plan(std::string_view model, ModelOptions mo, int64_t batch,
                                 const Hardware& hw, const PlannerOptions& options,
                                 std::string& why) {
  mo.batch = batch;
  const Graph graph = build_model(model, mo);
  try {
    return plan_auto(graph, hw, options);
  } catch (const Error& e) {
    why = e.what();
    return std::nullopt;
  }
}

class BatchSearch {
 public:
  BatchSearch(std::string_view model, const ModelOptions& base, const Hardware& hw,
              const PlannerOptions& options, const CapacityOptions& capacity)
      : model_(model), base_(base), hw_(hw), options_(options), capacity_(capacity) {}

  MaxBatch run() {
    if (capacity_.batch_limit < 1) {
      fail("the batch limit must be at least 1 (got {})", capacity_.batch_limit);
    }
    if (!(capacity_.time_limit > 0)) fail("the search time limit must be positive");
    plan(1, /*first=*/true);
    if (!plans(1)) fail("{} does not train even at batch 1: {}", model_, result_.why);
    if (capacity_.largest) {
      largest();
    } else {
      fastest();
    }
    result_.batch = kept_;
    result_.plan = std::move(kept_plan_);
    result_.seconds = clock_.seconds();
    return std::move(result_);
  }

 private:
  // Plans `batch` once (cached); false when the time limit stops it first
  // (never the first plan of the search).
  bool plan(int64_t batch, bool first = false) {
    if (rate_.contains(batch)) return true;
    if (!first && clock_.seconds() >= capacity_.time_limit) {
      result_.cut_short = true;
      return false;
    }
    const Stopwatch tried;
    std::string why;
    std::optional<AutoPlan> p = try_plan(model_, base_, batch, hw_, options_, why);
    CapacityTry t{.model = model_, .batch = batch, .plans = p.has_value()};
    t.seconds = tried.seconds();
    if (p) {
      t.iteration_time = p->best.sim.iteration_time;
      t.samples_per_s = static_cast<double>(batch) / t.iteration_time;
      rate_[batch] = t.samples_per_s;
      // The best so far by the search's rule: the fastest, or the largest.
      const bool better =
          kept_ == 0 || (capacity_.largest ? batch > kept_ : t.samples_per_s > rate_.at(kept_));
      if (better) {
        kept_ = batch;
        kept_plan_ = std::move(*p);
      }
    } else {
      t.why = why;
      rate_[batch] = -1;
      if (result_.first_failing == 0 || batch < result_.first_failing) {
        result_.first_failing = batch;
        result_.why = why;
      }
    }
    result_.tried.push_back(t);
    if (capacity_.progress) capacity_.progress(t);
    return true;
  }
  bool plans(int64_t batch) const { return rate_.at(batch) >= 0; }
  // Strictly faster; a batch that does not plan is slower than any that does.
  bool faster(int64_t a, int64_t b) const { return rate_.at(a) > rate_.at(b); }

  void fastest() {
    best_ = 1;
    int64_t below = 1;  // the doubling's batch before best_
    int64_t above = 0;  // the tried batch that ended the doubling (0: the limit did)
    while (best_ < capacity_.batch_limit) {
      const int64_t next = std::min(capacity_.batch_limit, best_ * 2);
      if (!plan(next)) return stop_cut();
      if (!faster(next, best_)) {
        above = next;
        break;
      }
      below = best_;
      best_ = next;
    }
    // Bracketed refinement between the nearest tried neighbours.
    int64_t lo = below;
    int64_t hi = above > 0 ? above : best_;
    while (best_ - lo > 1 || hi - best_ > 1) {
      const int64_t probe =
          best_ - lo >= hi - best_ ? lo + (best_ - lo) / 2 : best_ + (hi - best_) / 2;
      if (!plan(probe)) return stop_cut();
      if (faster(probe, best_)) {
        (probe < best_ ? hi : lo) = best_;
        best_ = probe;
      } else {
        (probe < best_ ? lo : hi) = probe;
      }
    }
    const auto rate = [&](int64_t b) { return fmt::format("{:.4g} samples/s", rate_.at(b)); };
    if (best_ == capacity_.batch_limit) {
      result_.stopped =
          fmt::format("throughput still rising at the batch limit of {}", capacity_.batch_limit);
    } else if (above == 0) {
      result_.stopped =
          fmt::format("throughput peaks at batch {} ({} per rank)", best_, rate(best_));
    } else {
      result_.stopped = fmt::format(
          "throughput peaks at batch {} ({} per rank); batch {} {}", best_, rate(best_), above,
          plans(above) ? fmt::format("is slower ({})", rate(above)) : std::string("does not plan"));
    }
  }

  void largest() {
    best_ = 1;
    int64_t bad = 0;
    while (best_ < capacity_.batch_limit) {
      const int64_t next = std::min(capacity_.batch_limit, best_ * 2);
      if (!plan(next)) return stop_cut();
      if (!plans(next)) {
        bad = next;
        break;
      }
      best_ = next;
    }
    while (bad > 0 && bad - best_ > 1) {
      const int64_t mid = best_ + (bad - best_) / 2;
      if (!plan(mid)) return stop_cut();
      (plans(mid) ? best_ : bad) = mid;
    }
    result_.stopped = bad > 0 ? fmt::format("batch {} is the largest that plans", best_)
                              : fmt::format("the batch limit of {} plans", capacity_.batch_limit);
  }

  // The time limit ran out: the best tried so far.
  void stop_cut() {
    result_.stopped = fmt::format(
        "the search time limit of {} s ran out after {} plans; the best batch tried is {}",
        capacity_.time_limit, result_.tried.size(), kept_);
  }

  std::string model_;
  ModelOptions base_;
  const Hardware& hw_;
  const PlannerOptions& options_;
  const CapacityOptions& capacity_;
  const Stopwatch clock_;
  std::map<int64_t, double> rate_;  // samples/s per rank; -1: does not plan
  int64_t best_ = 1;                // the bracket's centre
  int64_t kept_ = 0;                // the best batch tried (0: none yet)
  AutoPlan kept_plan_;
  MaxBatch result_;
};

}  // namespace

MaxBatch max_batch(std::string_view model, const ModelOptions& base, const Hardware& hardware,
                   const PlannerOptions& options, const CapacityOptions& capacity) {
  return BatchSearch(model, base, hardware, options, capacity).run();
}

MaxModel max_model(std::string_view family, const ModelOptions& base, const Hardware& hardware,
                   const PlannerOptions& options, const CapacityOptions& capacity) {
  std::vector<const ModelInfo*> members;
  for (const ModelInfo& m : model_zoo()) {
    if (std::string_view(m.name).starts_with(family)) members.push_back(&m);
  }
  if (family.empty() || members.empty()) {
    fail("no zoo model's name starts with '{}' (see `memwall models`)", family);
  }
  if (!(capacity.time_limit > 0)) fail("the search time limit must be positive");
  std::stable_sort(members.begin(), members.end(), [](const ModelInfo* a, const ModelInfo* b) {
    return a->param_count > b->param_count;
  });
  const Stopwatch clock;
  MaxModel r;
  for (const ModelInfo* m : members) {
    if (!r.tried.empty() && clock.seconds() >= capacity.time_limit) {
      fail(
          "the search time limit of {} s ran out after {} of the '{}' family's {} models, none of "
          "which plans; the next to try is {}",
          capacity.time_limit, r.tried.size(), family, members.size(), m->name);
    }
    const Stopwatch tried;
    std::string why;
    const int64_t batch = base.batch > 0 ? base.batch : 1;
    std::optional<AutoPlan> plan = try_plan(m->name, base, batch, hardware, options, why);
    CapacityTry t{.model = m->name, .batch = batch, .plans = plan.has_value(), .why = why};
    t.seconds = tried.seconds();
    if (plan) {
      t.iteration_time = plan->best.sim.iteration_time;
      t.samples_per_s = static_cast<double>(batch) / t.iteration_time;
    }
    r.tried.push_back(t);
    if (capacity.progress) capacity.progress(t);
    if (plan) {
      r.model = m->name;
      r.plan = std::move(*plan);
      r.seconds = clock.seconds();
      return r;
    }
  }
  fail("no model of the '{}' family trains here; the smallest, {}: {}", family,
       members.back()->name, r.tried.back().why);
}

}  // namespace memwall
