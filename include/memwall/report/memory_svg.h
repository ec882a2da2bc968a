// An SVG plot of device memory over one simulated iteration.
#pragma once

#include <string>
#include <string_view>

#include "memwall/sim/simulator.h"

namespace memwall {

// Device bytes over time as a step line, with the budget as a dashed line,
// labelled axes (time in ms, memory in GiB/MiB) and `title`. Standalone SVG
// 1.1, no scripts or external resources.
std::string memory_svg(const SimResult& result, std::string_view title);

}  // namespace memwall
