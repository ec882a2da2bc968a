// A calibrated profile and a graph's measured kernels
// (memwall/hw/calibration.h).
#include "memwall/hw/calibration.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/base/median.h"
#include "memwall/graph/calls.h"

namespace memwall {
namespace {

double flops_of(const nlohmann::json& probe, const char* dtype) {
  const auto& m = probe.at("matmul");
  return m.contains(dtype) ? m.at(dtype).at("flops_per_s").get<double>() : 0.0;
}

}  // namespace

nlohmann::json parse_compute_probe(const std::string& text) {
  nlohmann::json probe;
  try {
    probe = nlohmann::json::parse(text);
    (void)probe.at("matmul").at("fp32").at("flops_per_s");
  } catch (const std::exception& e) {
    fail("calibrate: the compute probe's output is invalid: {}", e.what());
  }
  return probe;
}

bool probe_is_gpu(const nlohmann::json& probe) { return probe.value("device", "cpu") == "cuda"; }

const Hardware* builtin_for_probe(const nlohmann::json& probe) {
  return probe_is_gpu(probe)
             ? builtin_gpu_for_device(probe.value("name", ""),
                                      probe.value("device_memory_bytes", uint64_t{0}))
             : nullptr;
}

uint64_t host_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

Hardware calibrated_profile(const Hardware& base, const nlohmann::json& probe,
                            const MachineMeasurements& measured) {
  const bool gpu = probe_is_gpu(probe);
  Hardware hw = base;
  hw.name = gpu ? "calibrated-gpu" : "calibrated-cpu";
  hw.description = fmt::format("measured by memwall calibrate on {} ({}, torch {})",
                               gpu ? probe.value("name", "a GPU") : "the CPU",
                               gpu ? "CUDA" : fmt::format("{} threads", probe.value("threads", 0)),
                               probe.value("torch", "?"));
  const uint64_t host = measured.host_memory_bytes;
  hw.host_memory_bytes = host;
  hw.device_memory_bytes = gpu ? probe.at("device_memory_bytes").get<uint64_t>() : host;
  // Achieved rates stand for the peaks, with efficiencies of 1: the cost
  // model then predicts what was measured (Note [Calibrated profiles] in
  // docs/cost-model.md).
  hw.peak_flops_fp32 = flops_of(probe, "fp32");
  hw.peak_flops_tf32 = flops_of(probe, "tf32");
  hw.peak_flops_fp16 = flops_of(probe, "fp16");
  hw.peak_flops_bf16 = flops_of(probe, "bf16");
  hw.hbm_bandwidth = probe.at("memory_bytes_per_s").get<double>();
  hw.compute_efficiency = 1.0;
  hw.memory_efficiency = 1.0;
  hw.matmul_efficiency = 0;  // measured rates: no fitted fractions on top
  hw.matmul_half_dim = 0;
  hw.attention_efficiency = 0;
  hw.h2d_bandwidth = measured.h2d_gbps * 1e9;
  hw.d2h_bandwidth = measured.d2h_gbps * 1e9;
  hw.pcie_latency = measured.copy_latency_s;  // Note [Copy latency]
  hw.gpus_per_node = 1;
  hw.host_pcie_bandwidth = std::max(hw.h2d_bandwidth, hw.d2h_bandwidth);
  hw.nvme_write_bandwidth = measured.nvme_write_gbps * 1e9;
  hw.nvme_read_bandwidth = measured.nvme_read_gbps * 1e9;
  hw.cpu_adam_params_per_s = measured.cpu_adam_params_per_s;
  hw.device_is_host_cpu = !gpu;
  return hw;
}

const std::vector<std::string>& calibration_fields_from_base() {
  // What one machine cannot show (Note [Calibrated profiles]).
  static const std::vector<std::string> fields = {"interconnect_bandwidth", "network_bandwidth",
                                                  "collective_step_latency", "network_step_latency",
                                                  "launch_latency"};
  return fields;
}

// Note [Op overhead]
// ~~~~~~~~~~~~~~~~~~
// Measured kernels are each op's call (arguments, the dispatcher, the
// kernel). Between the calls the executor's thread does its own work: the
// plan's frees, the call's bookkeeping, arena placements. On a GPU that
// work hides behind the queued kernels; on the emulated device the same
// thread runs both, so a step takes its kernels plus that work. On
// MobileNetV2 b8 (1,665 ops of 30 us on average) keep-all spent 3.6-3.8 ms
// of a 50 ms step outside its kernels, which a prediction from kernels
// alone left out (keep-all measured 1.14x of it); on GPT-2 small b8 s256
// it is 0.09%. calibrate --graph takes the executor's own time of a
// keep-all step (overhead_s: the step less its kernels and waits; the
// median over the iterations of the typical round), divided by the ops
// timed, as the profile's op_overhead, and the simulator adds it to each
// device op on the emulated device.

// Note [Measuring copy contention]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The simulator's model (Note [Copy contention] in src/sim): while a copy
// runs, compute does 1/`compute` of its work per second, and a copy takes
// `copy` times its time alone. The load (runtime::CopyLoad) copies 1 MiB
// blocks, the size of the test models' swapped activations, each waited
// for and then paused for as long as it took: the engine's worker sleeps
// between copies and is woken for each, as in a swap plan. A first load
// that copied back to back, never sleeping, measured compute 2.29-2.87 and
// copy 1.00-2.07 on one model in four calibrations of one day; with such a
// profile gpt-mini's vDNN ran in 0.46 of its predicted time, and in 0.84
// of the prediction without contention. In a run the woken worker takes a
// core at once and copies at full speed (Note [Copies that preempt the
// issuing thread] in src/exec/executor.cc), which a worker that never
// sleeps does not show. Per round, with the step alone taking A, beside
// the load L, and the copies busy a share f of L, the model says
// A = L (1 - f) + L f / compute, so compute = f / (A / L - 1 + f); copy is
// the mean copy's time beside the step over its time alone, in the same
// rhythm. Each is the median of the rounds (exec::time_kernel_rounds runs
// them).

double compute_slowdown(double alone_step, double loaded_step, double busy_share) {
  if (alone_step <= 0 || loaded_step <= 0 || busy_share <= 0) return 1;
  const double room = alone_step / loaded_step - 1 + busy_share;  // = f / compute
  const double most = Hardware::CopyContention::kMaxSlowdown;
  if (room * most <= busy_share) return most;
  return std::max(1.0, busy_share / room);
}

// Note [The typical round]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// What a run of the plan will measure is one step on the machine as it
// is then, so the profile takes the kernels of the typical round: the one
// whose median step is the rounds' median (the lower of two), each op's
// median there. This shared machine has slow periods longer than a round;
// the quickest round is as unlike a run as the slowest. A first version
// took each op's lowest median over the rounds, which mixed the quick
// moments of different rounds into a step quicker than any round made
// (on five models, 0.2-7.4% below the quickest round's kernels and 3-18%
// below the typical round's) and predicted keep-all runs too fast: of 27
// runs, 8 were within 15% of that prediction, 12 of the quickest round's,
// 17 of the typical round's (docs/cost-model.md, "Which round's kernels").
KernelMeasure fold_kernel_rounds(const Graph& graph, const std::vector<KernelRound>& rounds) {
  KernelMeasure out;
  if (rounds.empty()) return out;
  std::vector<double> compute_slowdowns, copy_slowdowns;
  for (const KernelRound& r : rounds) {
    compute_slowdowns.push_back(compute_slowdown(r.step_s, r.loaded_step_s, r.load_busy_share));
    if (r.copy_alone_s > 0) copy_slowdowns.push_back(r.copy_beside_s / r.copy_alone_s);
  }
  std::vector<const KernelRound*> alone;
  for (const KernelRound& r : rounds) alone.push_back(&r);
  std::sort(alone.begin(), alone.end(),
            [](const KernelRound* a, const KernelRound* b) { return a->step_s < b->step_s; });
  const KernelRound& typical = *alone[(alone.size() - 1) / 2];

  // Ops of one signature are one kernel: the mean of their medians.
  std::map<std::string, std::pair<double, int>> sums;
  const std::vector<double>& kernels = typical.kernel_seconds;
  for (const Op& op : graph.ops) {
    const size_t id = static_cast<size_t>(op.id);
    if (id >= kernels.size() || kernels[id] <= 0) continue;
    auto& [seconds, count] = sums[kernel_signature(op.call)];
    seconds += kernels[id];
    ++count;
    ++out.ops;
    out.seconds += kernels[id];
  }
  for (const auto& [signature, sum] : sums) {
    out.kernels.emplace(signature, sum.first / sum.second);
  }
  // Contention only slows; a ratio below 1 is the machine's drift. The
  // median round, for the same reason.
  const auto slowdown = [](std::vector<double> rounds_measured) {
    return std::clamp(median(std::move(rounds_measured)), 1.0,
                      Hardware::CopyContention::kMaxSlowdown);
  };
  if (!compute_slowdowns.empty()) out.contention.compute = slowdown(compute_slowdowns);
  if (!copy_slowdowns.empty()) out.contention.copy = slowdown(copy_slowdowns);
  // Note [Op overhead]: what the executor's thread did besides the kernels,
  // spread over the ops it ran them for.
  if (out.ops > 0 && typical.overhead_s > 0) {
    out.op_overhead = std::min(1.0, typical.overhead_s / static_cast<double>(out.ops));
  }
  return out;
}

void add_measured_kernels(Hardware& hw, const KernelMeasure& m) {
  for (const auto& [signature, seconds] : m.kernels) hw.kernel_seconds[signature] = seconds;
  // Note [Copy contention]: what the emulated device's copies and kernels
  // do to each other (a GPU's DMA engines leave its kernels alone).
  if (hw.device_is_host_cpu) {
    hw.copy_contention = m.contention;
    hw.op_overhead = m.op_overhead;  // Note [Op overhead]
  }
}

}  // namespace memwall
