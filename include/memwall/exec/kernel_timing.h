// A graph's kernels timed by the executor on this machine, for a profile's
// measured kernels (`memwall calibrate --graph`; hw's fold_kernel_rounds,
// memwall/hw/calibration.h, turns the rounds into the profile's figures).
#pragma once
#include <string>
#include <vector>

#include "memwall/exec/executor.h"
#include "memwall/graph/types.h"
#include "memwall/plan/plan.h"

namespace memwall::exec {

// One round (hw::KernelRound holds the same figures).
struct KernelRoundTimes {
  std::vector<double> kernel_seconds;  // per op id, the median call (RunResult::kernel_seconds)
  double step_s = 0;                   // the median step of the iterations after the first
  double overhead_s = 0;               // the median of their time outside kernels and waits
  double loaded_step_s = 0;            // the median step beside the copy load
  double load_busy_share = 0;          // the share of that time the load's copies ran
  double copy_alone_s = 0;             // the load's mean copy alone (0: none ran)
  double copy_beside_s = 0;            // and beside the step
};

struct KernelTiming {
  Status status = Status::kOk;
  std::string error;  // the failed run's line
  std::vector<KernelRoundTimes> rounds;
};

// Runs `plan` (keep-all: every op computed once per iteration) `rounds`
// times for 1 + `iterations` iterations on the emulated device from the
// values in `values` (a directory), timing each op's call in every
// iteration but the first (Note [Kernel timing]); each round is followed by
// one beside a copy load (runtime::CopyLoad of 1 MiB copies, Note
// [Measuring copy contention] in src/hw/calibration.cc), so that the
// machine's drift between the two is small. The whole step counts, not
// only the kernels: between kernels the executor's own thread waits for a
// core too. Stops at the first run that fails. Throws Error when the
// executor cannot be loaded.
// `device`: RunOptions::device ("emulated", or "cuda": each op between
// CUDA events, Note [Kernel timing on a GPU] in src/exec/cuda_run.cc).
KernelTiming time_kernel_rounds(const Graph& graph, const Plan& plan, const std::string& values,
                                int iterations, int rounds,
                                const std::string& device = "emulated");

}  // namespace memwall::exec
