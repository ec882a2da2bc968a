// A run beside its prediction (memwall/report/run_comparison.h): the
// records, and `memwall run`'s JSON and table.
#include "memwall/report/run_comparison.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "memwall/base/human.h"
#include "memwall/base/median.h"
#include "memwall/report/format.h"
#include "memwall/report/plan_figures.h"

namespace memwall {
namespace {

std::string ratio_text(double measured, double predicted) {
  return predicted > 0 ? fmt::format("{:.3f}", measured / predicted) : std::string("-");
}

}  // namespace

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

nlohmann::json run_comparison_json(const Graph& graph, const Plan& plan,
                                   const std::string& hardware, const std::string& policy,
                                   const MeasuredRun& result, const RunPrediction& p,
                                   const NvmeReservation& reservation) {
  nlohmann::json out = {{"graph", graph.name},
                        {"hardware", hardware},
                        {"device", result.device},
                        {"threads", result.threads},
                        {"ranks", result.ranks},
                        {"budget", plan.budget},
                        {"plan_steps", plan.steps.size()},
                        {"policy", result.arena ? "plan offsets" : policy},
                        {"measured_kernel_ops", measured_ops(graph)}};
  if (result.arena) out["planned_arena_bytes"] = pinned_arena(plan, graph);
  // Note [NVMe reservation]: the swap space the run held beside the plan's figures.
  out["nvme"] = nvme_json(p.nvme, reservation);
  out["nvme"]["held_bytes"] = result.nvme_reserved_bytes;
  nlohmann::json rows = nlohmann::json::array();
  for (size_t k = 0; k < result.steps.size(); ++k) {
    const MeasuredStep& m = result.steps[k];
    nlohmann::json row = {
        {"step", k + 1},
        {"loss", m.loss},
        {"device_peak_bytes", {{"measured", m.device_peak_bytes}, {"predicted", p.device}}},
        {"device_peak_allocated_bytes", m.device_peak_allocated_bytes},
        {"device_peak_reserved_bytes", m.device_peak_reserved_bytes},
        {"arena_bytes", m.arena_bytes},
        {"outputs_moved", m.outputs_moved},
        {"host_peak_bytes", {{"measured", m.host_peak_bytes}, {"predicted", p.host}}},
        {"step_time_s", {{"measured", m.step_time_s}, {"predicted", p.time}}},
        {"bytes_moved",
         {{"h2d", {{"measured", m.h2d_bytes}, {"predicted", p.moved(Resource::kH2D)}}},
          {"d2h", {{"measured", m.d2h_bytes}, {"predicted", p.moved(Resource::kD2H)}}},
          {"nvme_read",
           {{"measured", m.nvme_read_bytes}, {"predicted", p.moved(Resource::kNvmeRead)}}},
          {"nvme_write",
           {{"measured", m.nvme_write_bytes}, {"predicted", p.moved(Resource::kNvmeWrite)}}}}},
        {"kernel_time_s", m.kernel_time_s},
        {"wait_time_s", m.wait_time_s},
        {"comm_time_s", m.comm_time_s},
        {"overhead_s", m.overhead_s},
        {"transfer_overlap", {{"measured", m.overlap}, {"predicted", p.overlap}}}};
    if (p.time_with_run_kernels) {
      row["step_time_s"]["predicted_with_run_kernels"] = *p.time_with_run_kernels;
    }
    if (k < result.eager_losses.size()) row["eager_loss"] = result.eager_losses[k];
    rows.push_back(std::move(row));
  }
  out["steps"] = std::move(rows);
  if (result.eager_equal) {
    out["eager_equal"] = *result.eager_equal;
    if (!*result.eager_equal) out["eager_difference"] = result.eager_difference;
  }
  return out;
}

std::string run_comparison_text(const Graph& graph, const Plan& plan, const std::string& hardware,
                                const MeasuredRun& result, const RunPrediction& p,
                                const NvmeReservation& reservation) {
  std::string out;
  // Which cost model predicted: the roofline, or measured kernels for some
  // ops (Note [Measured kernels]).
  const size_t measured = measured_ops(graph);
  out += fmt::format(
      "{}: {} plan steps on {} ({} threads{}), budget {}, predicted with {}{}\n", graph.name,
      plan.steps.size(), result.device, result.threads,
      result.ranks > 1 ? fmt::format("; rank 0 of {}", result.ranks) : std::string(),
      human_bytes(plan.budget), hardware,
      measured == 0 ? std::string(" (roofline)")
                    : fmt::format(" ({} of {} ops' times measured)", measured, graph.ops.size()));
  out += fmt::format("{:>4}  {:>12}  {:>22}  {:>22}  {:>10}  {:>10}\n", "step", "loss",
                     "device peak (x pred)", "step time (x pred)", "moved", "overhead");
  for (size_t k = 0; k < result.steps.size(); ++k) {
    const MeasuredStep& m = result.steps[k];
    out += fmt::format(
        "{:>4}  {:>12.6g}  {:>22}  {:>22}  {:>10}  {:>9.1f}%\n", k + 1, m.loss,
        fmt::format(
            "{} ({})", human_bytes(m.device_peak_bytes),
            ratio_text(static_cast<double>(m.device_peak_bytes), static_cast<double>(p.device))),
        fmt::format("{} ({})", human_seconds(m.step_time_s), ratio_text(m.step_time_s, p.time)),
        human_bytes(m.h2d_bytes + m.d2h_bytes + m.nvme_read_bytes + m.nvme_write_bytes),
        m.step_time_s > 0 ? 100 * m.overhead_s / m.step_time_s : 0.0);
  }
  out +=
      field("predicted", fmt::format("device peak {}, host peak {}, step {}", human_bytes(p.device),
                                     human_bytes(p.host), human_seconds(p.time)));
  if (p.time_with_run_kernels && result.steps.size() > 1) {
    std::vector<double> later;
    for (size_t k = 1; k < result.steps.size(); ++k) later.push_back(result.steps[k].step_time_s);
    const double typical = median(std::move(later));  // as bench/run_fidelity.sh takes it
    out += field("with the run's kernels",
                 fmt::format("step {} predicted, {} measured ({}; the median of steps 2-{})",
                             human_seconds(*p.time_with_run_kernels), human_seconds(typical),
                             ratio_text(typical, *p.time_with_run_kernels), result.steps.size()));
  }
  if (result.arena && !result.steps.empty()) {
    const MeasuredStep& last = result.steps.back();
    // With offsets the arena is the device memory the run used: the figure
    // to hold against the predicted peak (docs/exec.md, "Plans with offsets").
    const auto arena = static_cast<double>(last.arena_bytes);
    const uint64_t planned = pinned_arena(plan, graph);
    out += field(
        "arena (plan offsets)",
        fmt::format("{} = {:.4f}x the plan's arena of {}; {:.4f}x the predicted peak, {:.4f}x the "
                    "live peak",
                    human_bytes(last.arena_bytes), arena / static_cast<double>(planned),
                    human_bytes(planned), arena / static_cast<double>(p.device),
                    arena / static_cast<double>(last.device_peak_bytes)));
  }
  if (result.nvme_reserved_bytes > 0) {
    out +=
        field("NVMe swap space", fmt::format("{} held; {}", human_bytes(result.nvme_reserved_bytes),
                                             nvme_row(p.nvme, reservation)));
  }
  if (result.eager_equal) {
    out += field("eager PyTorch", *result.eager_equal
                                      ? std::string("bitwise equal (losses and model states)")
                                      : "differs: " + result.eager_difference);
  }
  return out;
}

}  // namespace memwall
