// An SVG plot of device memory over one simulated iteration.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "memwall/sim/simulator.h"

namespace memwall {

// Device bytes over time as a step line, with the budget as a dashed line
// (when nonzero), the peak marked and labelled, axes with 1-2-5 ticks in
// units chosen by range (time in s/ms/µs, memory in GiB/MiB/KiB/B) and
// `title`. Standalone SVG 1.1, no scripts or external resources. Long curves
// are drawn through max_envelope, so the line has at most 4000 points and
// keeps every peak.
std::string memory_svg(const SimResult& result, std::string_view title);

// Downsamples a step curve (MemoryPoint semantics: `bytes` from `time` on)
// for plotting: splits [begin, end) into `columns` equal columns and returns
// a step curve with at most one point per column whose value is the curve's
// maximum over that column. Points before `begin` carry their value into the
// first column; points at or after `end` fall into the last one. Empty when
// `curve` is empty or `columns` is 0.
std::vector<MemoryPoint> max_envelope(const std::vector<MemoryPoint>& curve, double begin,
                                      double end, size_t columns);

}  // namespace memwall
