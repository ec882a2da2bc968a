// What `memwall run` reports (docs/exec.md, "What it checks and reports"):
// a real run's measurements beside the simulator's prediction of the same
// plan, as JSON and as a table. Plain records of report's own: the
// executor's results (exec::RunResult) reach them through the command line,
// since report does not see exec; the simulator's reach them here.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memwall/graph/types.h"
#include "memwall/plan/nvme_reservation.h"
#include "memwall/plan/plan.h"
#include "memwall/sim/simulator.h"

namespace memwall {

// What the simulator predicted, in the figures a run measures.
struct RunPrediction {
  double time = 0;
  uint64_t device = 0, host = 0, nvme = 0;
  // The simulator's transfer overlap: its copies' busy time not stalling
  // compute (1 - stall / busy), as the executor measures its own.
  double overlap = 0;
  // Note [The run's own kernels]: the step simulated with the run's own
  // kernel times (iteration_time_with_kernels); one rank's.
  std::optional<double> time_with_run_kernels;
  std::array<uint64_t, kNumResources> bytes_moved{};
  uint64_t moved(Resource r) const { return bytes_moved[static_cast<size_t>(r)]; }
};
// `sim`, simulated as the run runs (SimOptions::live_scratch without
// offsets, host_block_bytes the pool's pages, record_timeline).
RunPrediction run_prediction(const SimResult& sim);

// One iteration as the executor measured it (exec::StepMeasure's figures).
struct MeasuredStep {
  double loss = 0;
  uint64_t device_peak_bytes = 0;            // live tensor bytes (what the simulator counts)
  uint64_t device_peak_allocated_bytes = 0;  // after the allocator's rounding
  uint64_t device_peak_reserved_bytes = 0;   // what the allocator held (run so far)
  uint64_t arena_bytes = 0;                  // with offsets: the arena's high-water mark
  uint64_t outputs_moved = 0;
  uint64_t host_peak_bytes = 0;
  uint64_t h2d_bytes = 0, d2h_bytes = 0, nvme_read_bytes = 0, nvme_write_bytes = 0;
  double step_time_s = 0;
  double kernel_time_s = 0, wait_time_s = 0, comm_time_s = 0, overhead_s = 0;
  double overlap = 0;  // 1 - waits / the copies' busy time
};
// A span of the last iteration in the simulator's lanes (Resource order).
struct MeasuredSpan {
  int lane = 0;
  uint32_t step = 0;
  double start_s = 0, end_s = 0;
};
struct MeasuredMemory {
  double time_s = 0;
  uint64_t device_bytes = 0, host_bytes = 0;
};

// A run as the executor measured it (exec::RunResult's figures).
struct MeasuredRun {
  std::string device;
  int threads = 0;
  int ranks = 1;  // the graph's data-parallel ranks; this is rank 0
  std::vector<MeasuredStep> steps;
  std::vector<double> eager_losses;
  std::optional<bool> eager_equal;
  std::string eager_difference;
  bool arena = false;  // the plan's offsets were honoured
  uint64_t nvme_reserved_bytes = 0;
  std::vector<MeasuredSpan> events;    // the last iteration, when recorded
  std::vector<MeasuredMemory> memory;  // after each plan step, when recorded
};

// The last iteration as the simulator's timeline, for chrome_trace_json:
// spans per resource, device and host memory.
SimResult measured_timeline(const MeasuredRun& run, const Plan& plan);

// Ops whose time the profile measured (Note [Measured kernels]).
size_t measured_ops(const Graph& graph);

// `memwall run --json`: the run's figures beside the prediction, per step
// ("measured" and "predicted"), with the plan's NVMe reservation and what
// the run held, and eager's verdict. `policy`: the allocator of a plan
// without offsets. `reservation`: the plan's NVMe swap space in the
// runtime's sectors and blocks (Note [NVMe reservation]; the command
// line's run_nvme_reservation, since report does not see the runtime).
nlohmann::json run_comparison_json(const Graph& graph, const Plan& plan,
                                   const std::string& hardware, const std::string& policy,
                                   const MeasuredRun& run, const RunPrediction& prediction,
                                   const NvmeReservation& reservation);
// `memwall run`'s table: a row per step with each figure's ratio to the
// prediction, then the prediction, the step predicted with the run's own
// kernels, the arena of a plan with offsets, the NVMe swap space, eager's
// verdict.
std::string run_comparison_text(const Graph& graph, const Plan& plan, const std::string& hardware,
                                const MeasuredRun& run, const RunPrediction& prediction,
                                const NvmeReservation& reservation);

}  // namespace memwall
