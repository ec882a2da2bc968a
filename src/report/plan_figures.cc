// Figures printed for every plan (plan_figures.h).
#include "memwall/report/plan_figures.h"

#include <array>
#include <set>

#include <fmt/format.h>

#include "memwall/base/human.h"
#include "memwall/graph/graph.h"

namespace memwall {
namespace {

// "1,234 samples/s" at 100 and above, "12.3 samples/s" below.
std::string rate(double value, const char* unit) {
  return value >= 100 ? fmt::format("{} {}", grouped(static_cast<uint64_t>(value + 0.5)), unit)
                      : fmt::format("{:.3g} {}", value, unit);
}

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

}  // namespace

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

PlanFacts plan_facts(const Graph& g, const Plan& plan) {
  PlanFacts f;
  std::set<BufferId> swapped;
  for (const Step& s : plan.steps) {
    if (s.kind == StepKind::kRecompute) {
      ++f.recomputed_ops;
      f.recomputed_flops += g.ops[s.op].flops;
    }
    if (s.kind == StepKind::kSwapOut) {
      const BufferKind k = g.buffers[s.buf].kind;
      if ((k == BufferKind::kActivation || k == BufferKind::kTemp) &&
          swapped.insert(s.buf).second) {
        f.swapped_bytes += g.buffers[s.buf].bytes;
      }
    }
  }
  f.swapped = swapped.size();
  for (const auto& [buf, tier] : plan.placement)
    f.offloaded[static_cast<size_t>(tier)] += g.buffers[buf].bytes;
  return f;
}

std::string link_row(const SimResult& sim) {
  const auto moved = [&](Resource r) { return sim.bytes_moved[static_cast<size_t>(r)]; };
  return fmt::format("h2d {}, d2h {}, nvme read {}, nvme write {}, collectives {}",
                     human_bytes(moved(Resource::kH2D)), human_bytes(moved(Resource::kD2H)),
                     human_bytes(moved(Resource::kNvmeRead)),
                     human_bytes(moved(Resource::kNvmeWrite)), human_bytes(moved(Resource::kComm)));
}

std::string throughput_row(const Throughput& t, double iteration_time) {
  std::string work;
  if (t.batch > 0) {
    work = rate(t.samples_per_s, "samples/s");
    if (t.seq > 0) work += ", " + rate(t.tokens_per_s, "tokens/s");
    work += fmt::format(" ({}batch {}{}{} / {})",
                        t.ranks > 1 ? fmt::format("{} ranks x ", t.ranks) : std::string(), t.batch,
                        t.seq > 0 ? fmt::format(" x seq {}", t.seq) : std::string(),
                        t.context_parallel > 1
                            ? fmt::format(" / {} context-parallel ranks a sample", t.context_parallel)
                            : std::string(),
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

}  // namespace memwall
