// `memwall calibrate`'s options, and its --graph part: a traced graph's
// kernels measured on this machine for a profile's measured kernels (Note
// [Measured kernels] in hw/hardware.h). The values come from importers
// (a fresh trace or --keep-values), the keep-all plan from remat, the
// timing from the executor (exec::time_kernel_rounds), the figures from hw
// (fold_kernel_rounds): glue over four modules, which only cli may
// include together.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memwall/graph/types.h"
#include "memwall/hw/calibration.h"
#include "memwall/hw/hardware.h"
#include "memwall/importers/kept_values.h"

namespace memwall::cli {

struct CalibrateArgs {
  std::string out;
  std::string dir;  // swap directory for the NVMe probe
  std::string base = "l4";
  bool base_given = false;
  std::string compare;  // a built-in to print beside the measurement
  std::string python;
  bool quick = false;
  bool json = false;
  std::vector<std::string> graphs;  // --graph: time these graphs' kernels
  std::string keep_values;          // --keep-values (one --graph)
  std::string from;                 // --from: add kernels to this profile
  int kernel_iterations = 5;
  int kernel_rounds = 3;
};

// A line on a terminal's standard error saying what is measured now.
void progress(const CalibrateArgs& args, const std::string& what);

// --graph's files and --keep-values, read and checked before any measuring
// (Note [Kept values]): throws Error for a graph without call records.
struct KernelGraphs {
  std::vector<Graph> graphs;  // args.graphs' files
  importers::KeptValues kept;
};
KernelGraphs kernel_graphs(const CalibrateArgs& args);

struct TimedGraph {
  std::string file;
  KernelMeasure measure;
};
// --graph: each graph's kernels timed on this machine and added to `hw`'s
// measured kernels (a later graph's time for a shared kernel wins).
// Throws Error: a graph its model no longer gives, a failed run.
std::vector<TimedGraph> add_kernels(const CalibrateArgs& args, KernelGraphs& in, Hardware& hw);

nlohmann::json timed_json(const std::vector<TimedGraph>& timed);
void print_timed(const std::vector<TimedGraph>& timed);

// --from PROFILE --graph G...: kernels added to a profile measured before,
// without measuring the machine again.
int calibrate_kernels_only(const CalibrateArgs& args);

}  // namespace memwall::cli
