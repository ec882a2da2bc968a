// What `memwall alloc-replay` and `memwall bench alloc` share: the
// allocator flags, replaying a trace through a list of policies, and the
// table of the results.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "memwall/cli/alloc_trace.h"
#include "memwall/hw/hardware.h"

namespace memwall::cli {

// The flags as parsed.
struct AllocSetup {
  std::vector<std::string> policies;
  uint64_t capacity = 0;
  std::string capacity_source;  // "--capacity", or the GPU profile's name
  uint64_t granularity = alloc::kDefaultGranularity;
  alloc::Options options;     // max_split_size
  double layout_seconds = 1;  // the plan policy's layout (default_layout.h)
};

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

// Each policy of `setup` in turn (adding the trace's layout first when the
// plan policy is among them).
std::vector<PolicyReplay> replay_policies(AllocTrace& trace, const AllocSetup& setup);

// One row per policy: peak allocated (the policy's blocks), peak reserved
// and its ratio to `peak_live` (the most bytes requested at once, which no
// policy can go below), fragmentation, the device calls and whether it fits.
std::string replay_table(const std::vector<PolicyReplay>& runs, uint64_t peak_live);

}  // namespace memwall::cli
