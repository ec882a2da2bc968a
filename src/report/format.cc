// Table rows shared by the verbs (format.h).
#include "memwall/report/format.h"

#include <fmt/format.h>

#include "memwall/hw/hardware.h"

namespace memwall {

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

}  // namespace memwall
