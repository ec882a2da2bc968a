// The swap space a run reserves (nvme_space.h).
#include "memwall/exec/nvme_space.h"

#include "memwall/runtime/nvme_engine.h"

namespace memwall::exec {

NvmeReservation run_nvme_reservation(const Graph& graph, const Plan& plan) {
  return nvme_reservation(graph, plan, runtime::kNvmeSector, runtime::NvmeOptions{}.block_size);
}

}  // namespace memwall::exec
