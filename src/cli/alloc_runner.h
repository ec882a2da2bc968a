// The allocator flags `memwall alloc-replay` and `memwall bench alloc`
// share, bound to an AllocRequest (the replay through a list of policies,
// and its table, are the planner's: memwall/planner/alloc_trace.h).
#pragma once

#include <CLI/CLI.hpp>

#include "memwall/hw/hardware.h"
#include "memwall/planner/alloc_trace.h"

namespace memwall::cli {

// --policy --capacity --granularity --max-split-size --layout-time.
struct AllocFlags : AllocRequest {
  void add_options(CLI::App& app);
  AllocSetup parse(const Hardware& hw) const { return alloc_setup(*this, hw); }
};

}  // namespace memwall::cli
