// Plot axes with "nice" ticks (1, 2 or 5 times a power of ten) in a unit
// chosen by the range: s/ms/µs for time, GiB/MiB/KiB/B for memory.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace memwall::report {

struct Axis {
  double scale = 1;  // display units per base unit (seconds or bytes)
  std::string_view unit;
  double step = 1;   // between ticks, in display units
  int ticks = 1;     // intervals: the axis spans [0, step * ticks]
  int decimals = 0;  // enough to tell ticks apart

  double top() const { return step * ticks; }
  // Base units to display units.
  double display(double value) const { return value * scale; }
  std::string tick_label(int tick) const;
};

// An axis from 0 to at least `end` seconds (a 1 ms axis when `end` <= 0).
Axis time_axis(double end);
// An axis from 0 to at least `bytes` (a 1 B axis when `bytes` <= 0).
Axis bytes_axis(double bytes);

// "37.2 GiB", "6.83 GiB", "512 B": three significant digits in the unit that
// suits `bytes` itself.
std::string format_bytes(uint64_t bytes);

}  // namespace memwall::report
