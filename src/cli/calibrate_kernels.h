// `memwall calibrate --graph`: a traced graph's kernels, timed on this
// machine by the executor, for a profile's measured kernels (Note
// [Measured kernels] in hw/hardware.h).
#pragma once
#include <map>
#include <string>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "run_values.h"

namespace memwall::cli {

struct KernelMeasure {
  std::map<std::string, double> kernels;  // kernel signature -> seconds
  size_t ops = 0;                         // ops timed
  double seconds = 0;                     // their sum
  // Note [Measuring copy contention]: how much slower the keep-all step's
  // work goes while a copy runs beside it, and a copy beside the step than
  // alone; each at least 1.
  Hardware::CopyContention contention;
  // Note [Op overhead]: the quietest keep-all step's time outside its
  // kernels and waits, per op.
  double op_overhead = 0;
};

// Note [Measuring copy contention]: how much slower compute runs while a
// copy runs beside it, from a step that took `alone_step` seconds alone and
// `loaded_step` beside copies busy `busy_share` of that time; in [1,
// CopyContention::kMaxSlowdown] (1 where the step got no slower, the
// machine's drift).
double compute_slowdown(double alone_step, double loaded_step, double busy_share);

// Runs `graph_file`'s keep-all plan `rounds` times for 1 + `iterations`
// iterations on the emulated device (as large as hw's device memory),
// timing each op's call in every iteration but the first (Note [Kernel
// timing]); an op's time is the lowest of its rounds' medians. Each round
// is followed by one under a copy load, for the contention. The values
// come from a fresh trace of its model or from `kept` (memwall run
// --keep-values). Throws Error: a graph its model no longer gives, a failed
// run.
KernelMeasure measure_kernels(const std::string& graph_file, const Graph& graph, KeptValues& kept,
                              int iterations, int rounds, const Hardware& hw,
                              const std::string& python);

// A --graph file read for measure_kernels, before any measuring: throws
// Error when it carries no call records.
Graph read_kernel_graph(const std::string& graph_file);

}  // namespace memwall::cli
