// Hardware profiles as tables (hardware_tables.h).
#include "memwall/report/hardware_tables.h"

#include <fmt/format.h>

#include "memwall/base/human.h"

namespace memwall {

std::string gpus_table(const std::vector<Hardware>& gpus) {
  std::string out = fmt::format("{:<10} {:>10} {:>11} {:>11} {:>9} {:>9}  {}\n", "gpu", "memory",
                                "bf16 TF/s", "fp32 TF/s", "HBM GB/s", "H2D GB/s", "description");
  for (const Hardware& hw : gpus) {
    out += fmt::format("{:<10} {:>10} {:>11.1f} {:>11.1f} {:>9.0f} {:>9.1f}  {}\n", hw.name,
                       human_bytes(hw.device_memory_bytes), hw.peak_flops_bf16 / 1e12,
                       hw.peak_flops_fp32 / 1e12, hw.hbm_bandwidth / 1e9, hw.h2d_bandwidth / 1e9,
                       hw.description);
  }
  return out;
}

std::string profiles_side_by_side(const Hardware& measured, const Hardware& builtin) {
  std::string out = fmt::format(
      "\nbeside the built-in '{}' ({}); built-in rates are peak x "
      "efficiency, as its cost model uses them\n",
      builtin.name, builtin.description);
  out += fmt::format("  {:<22} {:>14} {:>14} {:>17}\n", "", "measured", builtin.name,
                     "measured/built-in");
  const auto row = [&out](const char* what, double ours, double theirs, auto text) {
    const double r = theirs > 0 && ours > 0 ? ours / theirs : 0.0;
    out += fmt::format("  {:<22} {:>14} {:>14} {:>17}\n", what, text(ours), text(theirs),
                       r == 0     ? std::string("-")
                       : r >= 0.1 ? fmt::format("{:.2f}", r)
                                  : fmt::format("{:.2g}", r));
  };
  const auto flops = [](double x) { return x > 0 ? human_flops(x) + "/s" : std::string("-"); };
  const auto gbps = [](double x) { return x > 0 ? fmt::format("{:.1f} GB/s", x / 1e9) : "-"; };
  const auto bytes = [](double x) { return human_bytes(static_cast<uint64_t>(x)); };
  const auto params = [](double x) { return x > 0 ? fmt::format("{:.0f} M/s", x / 1e6) : "-"; };
  const double ce = builtin.compute_efficiency, me = builtin.memory_efficiency;
  row("matmul fp32", measured.peak_flops_fp32, builtin.peak_flops_fp32 * ce, flops);
  row("matmul tf32", measured.peak_flops_tf32, builtin.peak_flops_tf32 * ce, flops);
  row("matmul bf16", measured.peak_flops_bf16, builtin.peak_flops_bf16 * ce, flops);
  row("matmul fp16", measured.peak_flops_fp16, builtin.peak_flops_fp16 * ce, flops);
  row("memory bandwidth", measured.hbm_bandwidth, builtin.hbm_bandwidth * me, gbps);
  row("device memory", static_cast<double>(measured.device_memory_bytes),
      static_cast<double>(builtin.device_memory_bytes), bytes);
  row("host -> device", measured.h2d_bandwidth, builtin.h2d_bandwidth, gbps);
  row("device -> host", measured.d2h_bandwidth, builtin.d2h_bandwidth, gbps);
  row("NVMe write", measured.nvme_write_bandwidth, builtin.nvme_write_bandwidth, gbps);
  row("NVMe read", measured.nvme_read_bandwidth, builtin.nvme_read_bandwidth, gbps);
  row("CPU AdamW step", measured.cpu_adam_params_per_s, builtin.cpu_adam_params_per_s, params);
  row("host memory", static_cast<double>(measured.host_memory_bytes),
      static_cast<double>(builtin.host_memory_bytes), bytes);
  return out;
}

std::string kernel_measure_rows(const std::string& file, const KernelMeasure& m) {
  return fmt::format("  {:<28} {} ops, {} kernels, {:.2f} ms in all ({})\n", "measured kernels",
                     m.ops, m.kernels.size(), m.seconds * 1e3, file) +
         fmt::format(
             "  {:<28} kernels {:.2f}x as long beside host<->device copies, copies {:.2f}x\n",
             "copy contention", m.contention.compute, m.contention.copy) +
         fmt::format("  {:<28} {:.2f} us per op outside its kernel (the executor's)\n",
                     "op overhead", m.op_overhead * 1e6);
}

nlohmann::json kernel_measure_json(const std::string& file, const KernelMeasure& m) {
  return {{"graph", file},
          {"ops", m.ops},
          {"kernels", m.kernels.size()},
          {"seconds", m.seconds},
          {"copy_contention", {{"compute", m.contention.compute}, {"copy", m.contention.copy}}},
          {"op_overhead", m.op_overhead}};
}

}  // namespace memwall
