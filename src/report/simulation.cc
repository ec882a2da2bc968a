// `memwall simulate`'s table and JSON (simulation.h).
#include "memwall/report/simulation.h"

#include <array>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/base/human.h"
#include "memwall/report/format.h"
#include "memwall/report/plan_figures.h"

namespace memwall {
namespace {

constexpr std::array<Resource, 4> kLinks = {Resource::kH2D, Resource::kD2H, Resource::kNvmeRead,
                                            Resource::kNvmeWrite};

uint64_t moved(const SimResult& r, Resource link) {
  return r.bytes_moved[static_cast<size_t>(link)];
}

}  // namespace

nlohmann::json simulation_json(const SimulationReport& s) {
  const SimResult& r = s.result;
  // A rank's graph runs on its share of the node (Note [Ranks on a node]).
  const int ranks = graph_ranks(s.graph);
  const auto k = static_cast<uint64_t>(ranks_per_node(s.hw, graph_gpus(s.graph)));
  nlohmann::json out = {{"graph", s.graph.name},
                        {"gpu", s.hw.name},
                        {"plan_gpu", s.plan.hardware},
                        {"plan", s.plan_file.empty() ? "default" : s.plan_file},
                        {"steps", s.plan.steps.size()},
                        {"valid", r.valid},
                        {"budget", r.budget},
                        {"iteration_time_s", r.iteration_time},
                        {"compute_time_s", r.compute_time},
                        {"compute_busy_fraction", r.compute_busy_fraction},
                        {"transfer_stall_s", r.transfer_stall_time},
                        {"host_compute_s", r.host_compute_time},
                        {"ranks", ranks},
                        {"gpus_per_node", s.hw.gpus_per_node},
                        {"ranks_per_node", k}};
  if (!r.valid) {
    out["failed_step"] = r.failed_step;
    out["reason"] = r.reason;
  }
  nlohmann::json links = nlohmann::json::object();
  for (const Resource link : kLinks) links[to_string(link)] = moved(r, link);
  out["bytes_moved"] = links;
  nlohmann::json peaks = nlohmann::json::object();
  for (int t = 0; t < kNumTiers; ++t) peaks[to_string(static_cast<Tier>(t))] = r.peak_bytes[t];
  out["peak_bytes"] = peaks;
  out["node_host_peak_bytes"] = checked_mul(r.peak_bytes[1], k, "host bytes");
  out["node_nvme_peak_bytes"] = checked_mul(r.peak_bytes[2], k, "NVMe bytes");
  out["nvme"] = nvme_json(r.peak_bytes[2], s.nvme);
  return out;
}

std::string simulation_text(const SimulationReport& s) {
  const SimResult& r = s.result;
  const int ranks = graph_ranks(s.graph);
  const auto k = static_cast<uint64_t>(ranks_per_node(s.hw, graph_gpus(s.graph)));
  std::string out = fmt::format("{} on {}: {} ({} steps)\n", s.graph.name, s.hw.name,
                                s.plan_file.empty() ? std::string("default plan") : s.plan_file,
                                grouped(s.plan.steps.size()));
  const auto line = [&](std::string_view label, const std::string& value) {
    out += field(label, value);
  };
  if (ranks > 1) line("ranks", ranks_row(s.hw, ranks));
  line("valid", r.valid ? std::string("yes") : fmt::format("no: {}", r.reason));
  // An invalid plan is simulated up to its first failing step only.
  line(r.valid ? "iteration time" : "simulated until", human_seconds(r.iteration_time));
  line("compute busy",
       fmt::format("{:.1f}% ({})", 100 * r.compute_busy_fraction, human_seconds(r.compute_time)));
  line("stalled on transfers", human_seconds(r.transfer_stall_time));
  if (r.host_compute_time > 0) line("host compute", human_seconds(r.host_compute_time));
  line("peak device memory", fmt::format("{} at {} (budget {})", human_bytes(r.peak_bytes[0]),
                                         human_seconds(r.peak_time[0]), human_bytes(r.budget)));
  const auto on_node = [&](uint64_t bytes) {
    if (k == 1) return human_bytes(bytes);
    return fmt::format("{} on the node ({} ranks x {})",
                       human_bytes(checked_mul(bytes, k, "node bytes")), k, human_bytes(bytes));
  };
  if (r.peak_bytes[1] > 0) {
    line("peak host memory",
         fmt::format("{} of {}", on_node(r.peak_bytes[1]), human_bytes(s.hw.host_memory_bytes)));
  }
  if (r.peak_bytes[2] > 0) {
    const std::string reserved = nvme_row(r.peak_bytes[2], s.nvme);
    line("peak NVMe", k == 1 ? reserved : on_node(r.peak_bytes[2]) + "; per rank " + reserved);
  }
  line("moved h2d / d2h", fmt::format("{} / {}", human_bytes(moved(r, Resource::kH2D)),
                                      human_bytes(moved(r, Resource::kD2H))));
  if (moved(r, Resource::kNvmeRead) + moved(r, Resource::kNvmeWrite) > 0) {
    line("moved NVMe read / write",
         fmt::format("{} / {}", human_bytes(moved(r, Resource::kNvmeRead)),
                     human_bytes(moved(r, Resource::kNvmeWrite))));
  }
  return out;
}

}  // namespace memwall
