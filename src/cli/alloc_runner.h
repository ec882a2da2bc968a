// What `memwall alloc-replay` and `memwall bench alloc` share: the
// allocator flags and the table of the results (the replay through a list
// of policies is the planner's: memwall/planner/alloc_trace.h). The table
// stays here: report may not use the planner's or the allocator's types
// (DESIGN.md).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "memwall/hw/hardware.h"
#include "memwall/planner/alloc_trace.h"

namespace memwall::cli {

// --policy --capacity --granularity --max-split-size --layout-time.
struct AllocFlags {
  std::string policy = "all";
  std::string capacity;
  std::string granularity = "2MiB";
  std::string max_split_size;
  double layout_seconds = 1;

  void add_options(CLI::App& app);
  // Throws Error naming the flag on bad values. The capacity defaults to
  // the GPU's memory (percentages are of it too).
  AllocSetup parse(const Hardware& hw) const;
};

// One row per policy: peak allocated (the policy's blocks), peak reserved
// and its ratio to `peak_live` (the most bytes requested at once, which no
// policy can go below), fragmentation, the device calls and whether it fits.
std::string replay_table(const std::vector<PolicyReplay>& runs, uint64_t peak_live);

}  // namespace memwall::cli
