// A simulation's Chrome trace and device memory plot, as files a verb
// writes (--trace FILE and --svg FILE of `memwall simulate` and `plan`; the
// command line adds the options).
#pragma once

#include <string>

#include "memwall/base/output_files.h"
#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/plan/plan.h"
#include "memwall/sim/simulator.h"

namespace memwall {

struct SimExports {
  std::string trace_file;  // empty: none
  std::string svg_file;    // empty: none

  // What the simulation must record for the exports asked for.
  SimOptions sim_options() const;
  // Declares the files asked for (before the work: see OutputFiles).
  void declare(OutputFiles& outputs) const;
  // Sets their texts; the caller commits.
  void write(OutputFiles& outputs, const Graph& graph, const Plan& plan, const Hardware& hw,
             const SimResult& r) const;
  // The "trace written to" / "plot written to" rows of a verb's table.
  std::string written_rows() const;
};

}  // namespace memwall
