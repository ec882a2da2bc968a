// chen-sqrt: Chen et al. 2016, "Training Deep Nets with Sublinear Memory
// Cost", sec. 4.1: split the forward into sqrt(n) segments and keep only
// the segment boundaries; backward recomputes each segment once from its
// boundary, for O(sqrt(n)) memory at the cost of one extra forward.
//
// On a graph, the n "layers" are the candidate stage splitting points: the
// forward's articulation points (candidate_checkpoints), where one buffer is
// all the forward carries across. Every k-th of them is kept, k =
// round(sqrt(n)), counting from the first so that each segment ends in its
// checkpoint (a 16-layer chain keeps layers 4, 8, 12 and 16).
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "memwall/plan/builders.h"
#include "planner_common.h"

namespace memwall {

RematResult plan_chen_sqrt(const Graph& graph, const Hardware& hardware, uint64_t budget,
                           const RematOptions& options) {
  const remat_detail::Stopwatch clock;
  // Chen's sqrt(n) rule is for when memory is short: where everything fits
  // it would only add a forward pass (46% on an unrolled LSTM), so the
  // planner keeps everything first, as chen-greedy does (Note [Keep-all
  // first]).
  if (auto fits = remat_detail::keep_all_if_it_fits(graph, hardware, budget, "chen-sqrt", clock)) {
    return *std::move(fits);
  }
  return remat_detail::chen_sqrt_rule(graph, hardware, budget, options);
}

}  // namespace memwall

namespace memwall::remat_detail {

RematResult chen_sqrt_rule(const Graph& graph, const Hardware& hardware, uint64_t budget,
                           const RematOptions& /*options*/) {
  const Stopwatch clock;
  const std::vector<BufferId> candidates = candidate_checkpoints(graph);
  if (candidates.empty()) {
    return finish(graph, hardware, budget, default_plan(graph, hardware.name, budget), "chen-sqrt",
                  "no articulation point to split at: keeps everything", clock);
  }
  const size_t n = candidates.size();
  const size_t stride =
      std::max<size_t>(1, static_cast<size_t>(std::llround(std::sqrt(static_cast<double>(n)))));
  std::vector<uint8_t> keep(graph.buffers.size(), 0);
  size_t kept = 0;
  for (size_t i = stride - 1; i < n; i += stride) {
    keep[candidates[i]] = 1;
    ++kept;
  }
  Plan plan = checkpoint_plan(graph, hardware, budget, keep);
  std::string note = fmt::format("kept {} of {} candidate checkpoints (every {})", kept, n, stride);
  return finish(graph, hardware, budget, std::move(plan), "chen-sqrt", std::move(note), clock);
}

}  // namespace memwall::remat_detail
