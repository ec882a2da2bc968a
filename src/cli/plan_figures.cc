// The throughput row and the runtime's NVMe reservation (plan_figures.h).
#include "plan_figures.h"

#include <fmt/format.h>

#include "memwall/base/human.h"
#include "memwall/runtime/nvme_engine.h"

namespace memwall::cli {

namespace {

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

NvmeReservation run_nvme_reservation(const Graph& graph, const Plan& plan) {
  return nvme_reservation(graph, plan, runtime::kNvmeSector, runtime::NvmeOptions{}.block_size);
}

}  // namespace memwall::cli
