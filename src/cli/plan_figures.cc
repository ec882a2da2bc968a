// The runtime's NVMe reservation (plan_figures.h).
#include "plan_figures.h"

#include "memwall/planner/runnable_plan.h"
#include "memwall/runtime/host_pool.h"
#include "memwall/runtime/nvme_engine.h"

namespace memwall::cli {

// The planner judges whether a plan runs with the host blocks `memwall run`
// allocates (Note [Plans that run]); it may not include the runtime.
static_assert(kRunHostBlockBytes == runtime::kHostPoolAlignment);

NvmeReservation run_nvme_reservation(const Graph& graph, const Plan& plan) {
  return nvme_reservation(graph, plan, runtime::kNvmeSector, runtime::NvmeOptions{}.block_size);
}

}  // namespace memwall::cli
