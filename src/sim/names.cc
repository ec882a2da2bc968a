// Names of simulator resources, as timelines and reports show them.
#include <array>

#include "memwall/sim/simulator.h"

namespace memwall {

std::string_view to_string(Resource resource) {
  static constexpr std::array<std::string_view, kNumResources> kNames = {
      "compute", "h2d", "d2h", "nvme_read", "nvme_write", "host_cpu", "comm"};
  return kNames.at(static_cast<size_t>(resource));
}

}  // namespace memwall
