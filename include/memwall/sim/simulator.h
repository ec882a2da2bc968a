// The discrete-event simulator: the single judge of a plan (DESIGN.md).
//
// See Note [Simulation model] in src/sim/simulator.cc for the exact rules:
// when steps issue, when they start and end, when memory is taken and given
// back, and what makes a plan invalid.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"
#include "memwall/plan/plan.h"

namespace memwall {

// What executes steps. Each resource runs one step at a time, in plan order.
enum class Resource : uint8_t {
  kCompute,    // the device compute stream
  kH2D,        // host -> device copy engine
  kD2H,        // device -> host copy engine
  kNvmeRead,   // NVMe -> host
  kNvmeWrite,  // host -> NVMe
  kHostCpu,    // host-side compute (optimizer steps)
  kComm,       // the collective-communication stream (ops of phase comm)
};
inline constexpr int kNumResources = 7;
std::string_view to_string(Resource resource);

// One busy interval of a resource, for timelines. `step` indexes plan.steps.
struct Span {
  Resource resource = Resource::kCompute;
  uint32_t step = 0;
  double start = 0;
  double end = 0;
};

// Bytes in use on a tier from `time` on (a step function).
struct MemoryPoint {
  double time = 0;
  uint64_t bytes = 0;
};

// One stay of a buffer in device memory, from its allocation to its
// release. The sequence numbers order all device allocations and releases
// as the simulator applied them (ties in time included), so intervals
// [alloc_seq, release_seq) conflict exactly when the simulator has the two
// buffers allocated at once: a static layout of these intervals passes the
// simulator's offset check. Stays still open when the simulation ends (the
// buffers the next iteration keeps, or all of them after an invalid step)
// end there: release_seq is one past every recorded event, release_time the
// iteration time.
struct Residency {
  BufferId buf = -1;
  uint64_t alloc_seq = 0;
  uint64_t release_seq = 0;
  double alloc_time = 0;
  double release_time = 0;
  OpId op = -1;  // SimResult::workspaces: the op whose workspace it is (buf is -1)
  // An in-place step's new version takes over its predecessor's memory: the
  // index of the residency it continues, or -1.
  int64_t continues = -1;
};

struct SimOptions {
  bool record_timeline = false;   // fill SimResult::timeline
  bool record_curves = true;      // fill SimResult::curves
  bool record_residency = false;  // fill SimResult::residencies
  // Note [Workspace span]: count each op's workspace, what its scratch adds
  // to the live bytes, instead of the span an arena gives it: the device
  // peak of a plan run without offsets (memwall run on the stitching
  // allocator). Planners keep the span, so that their plans lay out.
  bool live_scratch = false;
  // Note [Host pool blocks]: host memory in whole blocks of this many
  // bytes (0: bytes as they are). The runtime's pinned pool gives each
  // buffer whole 4 KiB pages (runtime::kHostPoolAlignment, for O_DIRECT),
  // which on small models is most of what it holds (cnn_bn's ZeRO-Offload
  // plan: 520,192 bytes in the pool for 280,728 counted): `memwall run`
  // predicts its host peak so. Planners count bytes.
  uint64_t host_block_bytes = 0;
};

struct SimResult {
  bool valid = true;
  // When invalid: the first failing step (index into plan.steps; steps.size()
  // for problems found at the end of the iteration) and why, as one line.
  size_t failed_step = 0;
  std::string reason;

  double iteration_time = 0;  // seconds, until every resource is idle
  double compute_time = 0;    // busy seconds of the device compute stream
  double compute_busy_fraction = 0;
  double transfer_stall_time = 0;  // compute stream idle, waiting for transfers
  double host_compute_time = 0;    // busy seconds of the host CPU
  double comm_time = 0;            // busy seconds of the collective stream
  // The time split (Note [Time split] in src/sim/critical_path.h): the
  // seconds the device compute stream sat idle, waiting for an input or
  // after its last step until the iteration ends, each charged to the
  // resource on the critical path; iteration_time = compute_time + their
  // sum. waiting[kCompute] is always 0.
  std::array<double, kNumResources> waiting{};

  // Bytes moved per resource (copy engines, NVMe queues, and the bytes each
  // rank sends in collectives; 0 for compute).
  std::array<uint64_t, kNumResources> bytes_moved{};
  std::array<uint64_t, kNumTiers> peak_bytes{};  // buffers in flight included
  std::array<double, kNumTiers> peak_time{};     // first time each peak is reached
  size_t device_peak_step = 0;  // the step whose allocation first reached the device peak
  uint64_t budget = 0;

  // Per tier, in time order; consecutive points have different times.
  std::array<std::vector<MemoryPoint>, kNumTiers> curves;
  std::vector<Span> timeline;          // in plan order per resource
  std::vector<Residency> residencies;  // in allocation order (workspace excluded)
  // The ops' workspace stays, in the same sequence numbers, when recorded.
  std::vector<Residency> workspaces;
  size_t steps_executed = 0;  // steps simulated before stopping
};

// Simulates `plan` over `graph` on `hardware`, the profile of a node: a
// graph of several data-parallel ranks (graph_ranks) runs on one rank's
// share of it (rank_share). Never throws for an invalid plan: the result
// says why it is invalid. Throws Error only when the plan does not fit the
// graph at all (validate_plan), or for a graph or profile the cost model
// cannot time (a bad rank count, an unknown collective).
SimResult simulate(const Graph& graph, const Plan& plan, const Hardware& hardware,
                   const SimOptions& options = {});

// Device bytes at the simulation's peak.
inline uint64_t device_peak(const SimResult& sim) {
  return sim.peak_bytes[static_cast<size_t>(Tier::kDevice)];
}

// Simulates `plan` without a device limit, so that the result carries the
// peak even when it is over plan.budget; times do not depend on the budget,
// so the verdict within it follows from the peak. result.budget is
// plan.budget. Curves and the timeline are recorded only when `timeline`.
SimResult simulate_unlimited(const Graph& graph, const Hardware& hardware, const Plan& plan,
                             bool timeline = false);

// Note [The run's own kernels] (src/sim/run_kernels.cc): the iteration
// time of `plan` simulated again with each op's time as a run measured it
// (`kernel_seconds` per op id, <= 0 for ops not timed: exec's
// RunResult::kernel_seconds), the same profile otherwise less its compute
// slowdown beside copies, as `memwall run` simulates the run
// (live_scratch without offsets, host memory in `host_block_bytes` pages).
// nullopt when no op was timed or the plan is then invalid.
std::optional<double> iteration_time_with_kernels(Graph graph, const Plan& plan, Hardware hardware,
                                                  const std::vector<double>& kernel_seconds,
                                                  uint64_t host_block_bytes);

// Every planner's last step, so that a returned plan is one the simulator
// accepts within `budget`: throws Error "<who>: ..." when the simulator
// rejects the plan or its device peak exceeds `budget` (naming the peak and
// the excess). Returns the simulation, with result.budget = budget.
SimResult require_fit(const Graph& graph, const Hardware& hardware, const Plan& plan,
                      uint64_t budget, std::string_view who);

}  // namespace memwall
