// keep-all: the default plan, every activation kept from forward to backward.
// The reference every other planner's overhead is measured against.
#include "memwall/plan/builders.h"
#include "planner_common.h"

namespace memwall {

RematResult plan_keep_all(const Graph& graph, const Hardware& hardware, uint64_t budget,
                          const RematOptions& /*options*/) {
  const remat_detail::Stopwatch clock;
  return remat_detail::finish(graph, hardware, budget, default_plan(graph, hardware.name, budget),
                              "keep-all", "no recomputation", clock);
}

}  // namespace memwall
