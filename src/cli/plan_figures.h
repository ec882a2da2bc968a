// Figures `memwall plan` prints for every plan, on both of its paths: the
// throughput (Note [Throughput] in src/planner/throughput.cc) and the time
// split (Note [Time split] in src/sim/critical_path.h), as table rows and
// JSON.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

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

}  // namespace memwall::cli
