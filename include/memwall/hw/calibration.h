// A calibrated hardware profile (`memwall calibrate`, docs/cost-model.md,
// "Calibration"): the measurements of this machine assembled over a base
// profile, and a traced graph's kernels, timed by the executor, folded into
// a profile's measured kernels (Note [Measured kernels] in hardware.h).
// Measuring is the runtime's (memwall/runtime/probes.h), the executor's
// (memwall/exec/kernel_timing.h) and the tracer's (the compute probe,
// importers::run_torch_tracer with --calibrate); this is what the figures
// mean to the cost model.
//
//   const nlohmann::json probe = parse_compute_probe(tracer_output);
//   const Hardware* own = builtin_for_probe(probe);   // a GPU memwall knows
//   Hardware hw = calibrated_profile(own ? *own : find_gpu("l4"), probe, measured);
//   add_measured_kernels(hw, fold_kernel_rounds(graph, rounds));
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"

namespace memwall {

// The compute probe's output (python/memwall/calibrate.py): matmul FLOP/s
// per dtype, memory bandwidth, the device. Throws Error ("calibrate: the
// compute probe's output is invalid: ...") unless it is JSON with a
// matmul fp32 rate.
nlohmann::json parse_compute_probe(const std::string& text);
bool probe_is_gpu(const nlohmann::json& probe);
// The built-in profile of the probe's GPU (builtin_gpu_for_device); null
// on the CPU or for a GPU memwall has no profile of.
const Hardware* builtin_for_probe(const nlohmann::json& probe);

// What the runtime's probes measured and the OS says.
struct MachineMeasurements {
  double h2d_gbps = 0, d2h_gbps = 0;  // the copy engine, each way
  double copy_latency_s = 0;          // Note [Copy latency]
  double nvme_write_gbps = 0, nvme_read_gbps = 0;
  double cpu_adam_params_per_s = 0;  // the CPU AdamW step, every thread
  uint64_t host_memory_bytes = 0;
};
// This machine's physical memory (0 when the OS does not say).
uint64_t host_memory_bytes();

// `base` with every figure the machine showed replaced by its measurement
// and efficiencies of 1, so that the cost model predicts what was measured
// (Note [Calibrated profiles] in docs/cost-model.md); named calibrated-gpu
// or calibrated-cpu. What one machine cannot show stays the base's
// (calibration_fields_from_base).
Hardware calibrated_profile(const Hardware& base, const nlohmann::json& probe,
                            const MachineMeasurements& measured);
const std::vector<std::string>& calibration_fields_from_base();

// A traced graph's kernels as a profile holds them.
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

// One round of a graph's keep-all plan timed by the executor, alone and
// then beside a copy load (exec::time_kernel_rounds).
struct KernelRound {
  std::vector<double> kernel_seconds;  // per op id, the median call; <= 0: not timed
  double step_s = 0;                   // the median step (iterations after the first)
  double overhead_s = 0;               // the median step's time outside kernels and waits
  double loaded_step_s = 0;            // the same beside the copy load
  double load_busy_share = 0;          // the share of that time the load's copies ran
  double copy_alone_s = 0;             // the load's mean copy alone (0: none ran)
  double copy_beside_s = 0;            // and beside the step
};

// Note [Measuring copy contention]: how much slower compute runs while a
// copy runs beside it, from a step that took `alone_step` seconds alone and
// `loaded_step` beside copies busy `busy_share` of that time; in [1,
// CopyContention::kMaxSlowdown] (1 where the step got no slower, the
// machine's drift).
double compute_slowdown(double alone_step, double loaded_step, double busy_share);

// The rounds' kernels by signature (the typical round's: Note [The typical
// round]), the copy contention and the op overhead.
KernelMeasure fold_kernel_rounds(const Graph& graph, const std::vector<KernelRound>& rounds);

// Adds `m`'s kernels to `hw`'s measured kernels (a later graph's time for
// a shared kernel wins); on the emulated device also its copy contention
// and op overhead (a GPU's DMA engines leave its kernels alone).
void add_measured_kernels(Hardware& hw, const KernelMeasure& m);

}  // namespace memwall
