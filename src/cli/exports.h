// --trace FILE and --svg FILE: a simulation's Chrome trace and device memory
// plot, for the verbs that simulate a plan (simulate, plan).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "memwall/base/output_files.h"
#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/plan/plan.h"
#include "memwall/sim/simulator.h"

namespace memwall::cli {

struct SimExports {
  std::string trace_file;
  std::string svg_file;

  void add_options(CLI::App& app);
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

// The plan as memwall.plan/1 text, stamped with the fingerprint of `graph`,
// the graph it runs (Note [Graph fingerprint]).
std::string plan_text_for(Plan plan, const Graph& graph);

}  // namespace memwall::cli
