// The NVMe swap space a plan needs (Note [NVMe reservation] in
// src/plan/nvme_reservation.cc): what `memwall run` reserves, and what
// `memwall plan` and `memwall simulate` print beside the planned NVMe use.
#pragma once

#include <cstdint>
#include <vector>

#include "memwall/graph/types.h"
#include "memwall/plan/plan.h"

namespace memwall {

struct NvmeReservation {
  uint64_t buffers = 0;      // buffers the plan ever puts on NVMe
  uint64_t bytes = 0;        // their bytes
  uint64_t blocks = 0;       // their bytes, each buffer rounded up to whole blocks
  uint64_t block_bytes = 0;  // the NVMe engine's block
  uint64_t reserved_bytes() const { return blocks * block_bytes; }
};

// Per buffer: 1 when the plan places it on NVMe or swaps it out to NVMe.
// The plan must have passed validate_plan against the graph.
std::vector<uint8_t> nvme_buffers(const Graph& graph, const Plan& plan);

// The reservation in the largest block from `largest` down to `smallest`,
// halving, whose rounding adds at most 1/16 to the buffers' bytes, else in
// `smallest` (the NVMe engine's bounds: runtime::kNvmeMinBlock and
// NvmeOptions::block_size). `smallest` > 0 divides `largest`. Throws Error
// when the bytes overflow.
NvmeReservation nvme_reservation(const Graph& graph, const Plan& plan, uint64_t smallest,
                                 uint64_t largest);

}  // namespace memwall
