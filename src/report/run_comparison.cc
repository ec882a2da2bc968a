// A run beside its prediction (memwall/report/run_comparison.h).
#include "memwall/report/run_comparison.h"

#include <algorithm>

namespace memwall {

RunPrediction run_prediction(const SimResult& sim) {
  RunPrediction p;
  p.time = sim.iteration_time;
  p.device = sim.peak_bytes[0];
  p.host = sim.peak_bytes[1];
  p.nvme = sim.peak_bytes[2];
  p.bytes_moved = sim.bytes_moved;
  double copy_busy = 0;
  for (const Span& span : sim.timeline) {
    if (span.resource == Resource::kH2D || span.resource == Resource::kD2H ||
        span.resource == Resource::kNvmeRead || span.resource == Resource::kNvmeWrite) {
      copy_busy += span.end - span.start;
    }
  }
  p.overlap = copy_busy > 0 ? std::clamp(1.0 - sim.transfer_stall_time / copy_busy, 0.0, 1.0) : 0.0;
  return p;
}

SimResult measured_timeline(const MeasuredRun& run, const Plan& plan) {
  SimResult r;
  r.valid = true;
  r.budget = plan.budget;
  for (const MeasuredSpan& e : run.events) {
    r.timeline.push_back({static_cast<Resource>(e.lane), e.step, e.start_s, e.end_s});
    r.iteration_time = std::max(r.iteration_time, e.end_s);
  }
  for (const MeasuredMemory& m : run.memory) {
    r.curves[0].push_back({m.time_s, m.device_bytes});
    r.curves[1].push_back({m.time_s, m.host_bytes});
    r.peak_bytes[0] = std::max(r.peak_bytes[0], m.device_bytes);
    r.peak_bytes[1] = std::max(r.peak_bytes[1], m.host_bytes);
  }
  if (!run.steps.empty()) r.iteration_time = run.steps.back().step_time_s;
  return r;
}

size_t measured_ops(const Graph& graph) {
  return static_cast<size_t>(
      std::count_if(graph.ops.begin(), graph.ops.end(), [](const Op& op) { return op.time; }));
}

}  // namespace memwall
