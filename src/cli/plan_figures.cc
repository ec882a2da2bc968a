// The runtime's NVMe reservation (plan_figures.h).
#include "plan_figures.h"

#include "memwall/runtime/nvme_engine.h"

namespace memwall::cli {

NvmeReservation run_nvme_reservation(const Graph& graph, const Plan& plan) {
  return nvme_reservation(graph, plan, runtime::kNvmeSector, runtime::NvmeOptions{}.block_size);
}

}  // namespace memwall::cli
