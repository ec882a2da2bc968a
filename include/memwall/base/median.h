// The median of a list of measurements: what the modules that read timings
// (hw's calibration, report's run comparison) take as the typical one, the
// odd preempted run of a shared machine not moving it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace memwall {

// The median of `values` (0 when empty; the mean of the middle two for an
// even count). The runtime, which may not include base (DESIGN.md: it
// depends on alloc only), has its own copy, runtime::median
// (memwall/runtime/probes.h), which must agree with this one.
inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n == 0 ? 0.0 : n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace memwall
