#include "plan_figures.h"

#include <array>

#include <fmt/format.h>

#include "format.h"
#include "memwall/runtime/nvme_engine.h"

namespace memwall::cli {
namespace {

// The waiting causes in display order, with their row and JSON names.
struct Cause {
  Resource resource;
  const char* label;
  const char* key;
};
constexpr std::array<Cause, 6> kCauses = {{
    {Resource::kH2D, "h2d", "h2d"},
    {Resource::kD2H, "d2h", "d2h"},
    {Resource::kNvmeRead, "NVMe read", "nvme_read"},
    {Resource::kNvmeWrite, "NVMe write", "nvme_write"},
    {Resource::kHostCpu, "host CPU", "host_cpu"},
    {Resource::kComm, "collectives", "collectives"},
}};

double waited(const SimResult& sim, Resource r) { return sim.waiting[static_cast<size_t>(r)]; }

std::string rate(double value, const char* unit) {
  return value >= 100 ? fmt::format("{} {}", grouped(static_cast<uint64_t>(value + 0.5)), unit)
                      : fmt::format("{:.3g} {}", value, unit);
}

}  // namespace

std::string throughput_row(const Throughput& t, double iteration_time) {
  std::string work;
  if (t.batch > 0) {
    work = rate(t.samples_per_s, "samples/s");
    if (t.seq > 0) work += ", " + rate(t.tokens_per_s, "tokens/s");
    work += fmt::format(" ({}batch {}{} / {})",
                        t.ranks > 1 ? fmt::format("{} ranks x ", t.ranks) : std::string(), t.batch,
                        t.seq > 0 ? fmt::format(" x seq {}", t.seq) : std::string(),
                        human_seconds(iteration_time));
  } else {
    work = rate(t.iterations_per_s, "iterations/s") + " (the graph gives no batch)";
  }
  return work + fmt::format(
                    "; MFU {:.1f}% of the {} peak (model FLOPs {}{}, without "
                    "recomputation)",
                    100 * t.mfu, to_string(t.dtype), human_flops(t.model_flops),
                    t.ranks > 1 ? " per rank" : "");
}

nlohmann::json throughput_json(const Throughput& t) {
  const auto or_null = [](bool known, double value) {
    return known ? nlohmann::json(value) : nlohmann::json(nullptr);
  };
  const auto count_or_null = [](int64_t value) {
    return value > 0 ? nlohmann::json(value) : nlohmann::json(nullptr);
  };
  return {{"ranks", t.ranks},
          {"batch", count_or_null(t.batch)},
          {"seq", count_or_null(t.seq)},
          {"iterations_per_s", t.iterations_per_s},
          {"samples_per_s", or_null(t.batch > 0, t.samples_per_s)},
          {"tokens_per_s", or_null(t.batch > 0 && t.seq > 0, t.tokens_per_s)},
          {"model_flops", t.model_flops},
          {"mfu_dtype", std::string(to_string(t.dtype))},
          {"peak_flops", t.peak_flops},
          {"mfu", t.mfu}};
}

std::string time_split_row(const SimResult& sim) {
  std::string row = "compute " + human_seconds(sim.compute_time);
  std::string waits;
  for (const Cause& c : kCauses) {
    const double w = waited(sim, c.resource);
    if (w > 0)
      waits += fmt::format("{}{} {}", waits.empty() ? "" : ", ", c.label, human_seconds(w));
  }
  if (waits.empty()) return row + " (the whole iteration: no waits)";
  return row + " + waiting on " + waits + " = " + human_seconds(sim.iteration_time);
}

nlohmann::json time_split_json(const SimResult& sim) {
  nlohmann::json j = {{"compute", sim.compute_time}};
  for (const Cause& c : kCauses) j[c.key] = waited(sim, c.resource);
  return j;
}

NvmeReservation run_nvme_reservation(const Graph& graph, const Plan& plan) {
  return nvme_reservation(graph, plan, runtime::kNvmeSector, runtime::NvmeOptions{}.block_size);
}

std::string nvme_row(uint64_t planned_peak, const NvmeReservation& r) {
  return fmt::format("{} planned, {} reserved in {} blocks ({} buffer{})",
                     human_bytes(planned_peak), human_bytes(r.reserved_bytes()),
                     human_bytes(r.block_bytes), grouped(r.buffers), r.buffers == 1 ? "" : "s");
}

nlohmann::json nvme_json(uint64_t planned_peak, const NvmeReservation& r) {
  return {{"planned_peak_bytes", planned_peak},
          {"reserved_bytes", r.reserved_bytes()},
          {"block_bytes", r.block_bytes},
          {"buffers", r.buffers}};
}

}  // namespace memwall::cli
