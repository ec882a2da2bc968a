// Figures `memwall plan`, `simulate` and `run` print for every plan: the
// time split (Note [Time split] in src/sim/critical_path.h), the NVMe swap
// space (Note [NVMe reservation] in src/plan/nvme_reservation.cc), what a
// plan does counted from its steps and the bytes it moves over each link,
// and the throughput (memwall/sim/throughput.h), as table rows and JSON.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "memwall/graph/types.h"
#include "memwall/plan/nvme_reservation.h"
#include "memwall/plan/plan.h"
#include "memwall/sim/simulator.h"
#include "memwall/sim/throughput.h"

namespace memwall {

// "time split" row: compute plus the waits charged to each resource, which
// add up to the iteration time.
std::string time_split_row(const SimResult& sim);
// {"compute": s, "h2d": s, "d2h": s, "nvme_read": s, "nvme_write": s,
//  "host_cpu": s, "collectives": s}
nlohmann::json time_split_json(const SimResult& sim);

// "1.43 MiB planned, 39.00 MiB reserved in 1.00 MiB blocks (39 buffers)":
// the simulator's peak NVMe use and the reservation.
std::string nvme_row(uint64_t planned_peak, const NvmeReservation& r);
// {"planned_peak_bytes", "reserved_bytes", "block_bytes", "buffers"}
nlohmann::json nvme_json(uint64_t planned_peak, const NvmeReservation& r);

// What a plan does, counted from its steps.
struct PlanFacts {
  size_t recomputed_ops = 0;
  double recomputed_flops = 0;
  size_t swapped = 0;  // activations (and other temporaries) swapped out
  uint64_t swapped_bytes = 0;
  uint64_t offloaded[kNumTiers]{};  // model-state bytes starting off the device, by tier
};
PlanFacts plan_facts(const Graph& graph, const Plan& plan);

// "bytes over links" row: h2d, d2h, NVMe read and write, collectives.
std::string link_row(const SimResult& sim);

// "throughput" row: samples/s, tokens/s, MFU and what they count.
std::string throughput_row(const Throughput& t, double iteration_time);
nlohmann::json throughput_json(const Throughput& t);

}  // namespace memwall
