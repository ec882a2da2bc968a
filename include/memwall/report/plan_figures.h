// Figures `memwall plan` prints for every plan, on both of its paths: the
// throughput (Note [Throughput] in src/planner/throughput.cc), the time
// split (Note [Time split] in src/sim/critical_path.h) and the NVMe swap
// space (Note [NVMe reservation] in src/plan/nvme_reservation.cc), as table
// rows and JSON.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "memwall/plan/nvme_reservation.h"
#include "memwall/planner/planner.h"
#include "memwall/sim/simulator.h"

namespace memwall::cli {

// "throughput" row: samples/s, tokens/s, MFU and what they count.
std::string throughput_row(const Throughput& t, double iteration_time);
nlohmann::json throughput_json(const Throughput& t);

// "time split" row: compute plus the waits charged to each resource, which
// add up to the iteration time.
std::string time_split_row(const SimResult& sim);
// {"compute": s, "h2d": s, "d2h": s, "nvme_read": s, "nvme_write": s,
//  "host_cpu": s, "collectives": s}
nlohmann::json time_split_json(const SimResult& sim);

// The swap space `memwall run` reserves for the plan, in the blocks it
// picks within the NVMe engine's bounds: the executor's own figure.
NvmeReservation run_nvme_reservation(const Graph& graph, const Plan& plan);
// "1.43 MiB planned, 39.00 MiB reserved in 1.00 MiB blocks (39 buffers)":
// the simulator's peak NVMe use and the reservation.
std::string nvme_row(uint64_t planned_peak, const NvmeReservation& r);
// {"planned_peak_bytes", "reserved_bytes", "block_bytes", "buffers"}
nlohmann::json nvme_json(uint64_t planned_peak, const NvmeReservation& r);

}  // namespace memwall::cli
