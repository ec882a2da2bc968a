#include "format.h"

#include <fmt/format.h>

#include "memwall/hw/hardware.h"

namespace memwall::cli {

std::string human_bytes(uint64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes) / 1024.0;
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.2f} {}", value, kUnits[unit]);
}

std::string grouped(uint64_t value) {
  std::string digits = std::to_string(value);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string human_seconds(double seconds) {
  if (seconds >= 1.0) return fmt::format("{:.3f} s", seconds);
  if (seconds >= 1e-3) return fmt::format("{:.2f} ms", seconds * 1e3);
  return fmt::format("{:.1f} us", seconds * 1e6);
}

std::string exact_bytes(uint64_t bytes) {
  return fmt::format("{} B ({})", grouped(bytes), human_bytes(bytes));
}

std::string human_flops(double flops) {
  static const char* const kUnits[] = {"FLOP",  "kFLOP", "MFLOP", "GFLOP",
                                       "TFLOP", "PFLOP", "EFLOP"};
  int unit = 0;
  while (flops >= 1000.0 && unit < 6) {
    flops /= 1000.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{:.0f} FLOP", flops)
                   : fmt::format("{:.2f} {}", flops, kUnits[unit]);
}

std::string field(std::string_view label, std::string_view value, int width) {
  return fmt::format("  {:<{}}{}\n", label, width, value);
}

// What the ranks share, for the summary (Note [Ranks on a node] in
// hw/ranks.cc): how many nodes, and which figures are per rank.
std::string ranks_row(const Hardware& hw, int ranks) {
  const int k = ranks_per_node(hw, ranks);
  const int nodes = (ranks + hw.gpus_per_node - 1) / hw.gpus_per_node;
  const std::string where =
      fmt::format("{} on {} node{} of {} GPU{}", ranks, nodes, nodes == 1 ? "" : "s",
                  hw.gpus_per_node, hw.gpus_per_node == 1 ? "" : "s");
  if (k == 1) return where + " (each rank has its host to itself); figures are per rank";
  return fmt::format(
      "{} ({} ranks share each host's memory, PCIe, NVMe and CPU); figures are per rank, "
      "host memory and NVMe use per node",
      where, k);
}

}  // namespace memwall::cli
