// Capacity searches: the largest batch, the largest model of a family.
#include <algorithm>

#include <fmt/format.h>

#include "memwall/graph/error.h"
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

}  // namespace

MaxBatch max_batch(std::string_view model, const ModelOptions& base, const Hardware& hardware,
                   const PlannerOptions& options, int64_t limit) {
  if (limit < 1) fail("the batch limit must be at least 1 (got {})", limit);
  MaxBatch r;
  std::string why;
  std::optional<AutoPlan> plan = try_plan(model, base, 1, hardware, options, why);
  ++r.plans_tried;
  if (!plan) fail("{} does not train even at batch 1: {}", model, why);
  r.batch = 1;
  r.plan = std::move(*plan);
  // Double until a batch fails, then bisect between the last good and it.
  int64_t bad = 0;
  while (r.batch < limit) {
    const int64_t next = std::min(limit, r.batch * 2);
    plan = try_plan(model, base, next, hardware, options, why);
    ++r.plans_tried;
    if (!plan) {
      bad = next;
      r.why = why;
      break;
    }
    r.batch = next;
    r.plan = std::move(*plan);
  }
  while (bad > 0 && bad - r.batch > 1) {
    const int64_t mid = r.batch + (bad - r.batch) / 2;
    plan = try_plan(model, base, mid, hardware, options, why);
    ++r.plans_tried;
    if (plan) {
      r.batch = mid;
      r.plan = std::move(*plan);
    } else {
      bad = mid;
      r.why = why;
    }
  }
  r.first_failing = bad;
  return r;
}

MaxModel max_model(std::string_view family, const ModelOptions& base, const Hardware& hardware,
                   const PlannerOptions& options) {
  std::vector<const ModelInfo*> members;
  for (const ModelInfo& m : model_zoo()) {
    if (std::string_view(m.name).starts_with(family)) members.push_back(&m);
  }
  if (family.empty() || members.empty()) {
    fail("no zoo model's name starts with '{}' (see `memwall models`)", family);
  }
  std::stable_sort(members.begin(), members.end(), [](const ModelInfo* a, const ModelInfo* b) {
    return a->param_count > b->param_count;
  });
  MaxModel r;
  for (const ModelInfo* m : members) {
    std::string why;
    std::optional<AutoPlan> plan =
        try_plan(m->name, base, base.batch > 0 ? base.batch : 1, hardware, options, why);
    if (plan) {
      r.tried.emplace_back(m->name, "plans");
      r.model = m->name;
      r.plan = std::move(*plan);
      return r;
    }
    r.tried.emplace_back(m->name, why);
  }
  fail("no model of the '{}' family trains here; the smallest, {}: {}", family,
       members.back()->name, r.tried.back().second);
}

}  // namespace memwall
