#include "axis.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

namespace memwall::report {
namespace {

constexpr double kKiB = 1024.0;
constexpr double kMiB = kKiB * 1024.0;
constexpr double kGiB = kMiB * 1024.0;

// The smallest 1, 2 or 5 times a power of ten that is >= raw.
double nice_step(double raw) {
  if (!(raw > 0) || !std::isfinite(raw)) return 1;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  const double mantissa = raw / power;
  const double nice = mantissa <= 1 ? 1 : mantissa <= 2 ? 2 : mantissa <= 5 ? 5 : 10;
  return nice * power;
}

// About `target` intervals covering [0, span] display units.
Axis make_axis(double scale, std::string_view unit, double span, int target, double min_step) {
  Axis axis;
  axis.scale = scale;
  axis.unit = unit;
  axis.step = std::max(nice_step(span / target), min_step);
  // The slack absorbs rounding in span / step when span is a tick already.
  const double intervals = std::ceil(span / axis.step - 1e-9);
  axis.ticks = static_cast<int>(std::clamp(intervals, 1.0, 1000.0));
  axis.decimals = std::max(0, static_cast<int>(-std::floor(std::log10(axis.step) + 1e-9)));
  return axis;
}

}  // namespace

std::string Axis::tick_label(int tick) const {
  return fmt::format("{:.{}f}", step * tick, decimals);
}

Axis time_axis(double end) {
  constexpr int kTarget = 8;
  if (!(end > 0) || !std::isfinite(end)) return make_axis(1e3, "ms", 1, kTarget, 0);
  if (end >= 1) return make_axis(1, "s", end, kTarget, 0);
  if (end >= 1e-3) return make_axis(1e3, "ms", end * 1e3, kTarget, 0);
  return make_axis(1e6, "µs", end * 1e6, kTarget, 0);
}

Axis bytes_axis(double bytes) {
  constexpr int kTarget = 5;
  if (!(bytes > 0) || !std::isfinite(bytes)) return make_axis(1, "B", 1, kTarget, 1);
  if (bytes >= kGiB) return make_axis(1 / kGiB, "GiB", bytes / kGiB, kTarget, 0);
  if (bytes >= kMiB) return make_axis(1 / kMiB, "MiB", bytes / kMiB, kTarget, 0);
  if (bytes >= kKiB) return make_axis(1 / kKiB, "KiB", bytes / kKiB, kTarget, 0);
  return make_axis(1, "B", bytes, kTarget, 1);  // no fractions of a byte
}

std::string format_bytes(uint64_t bytes) {
  const auto value = static_cast<double>(bytes);
  const auto [unit, name] = value >= kGiB   ? std::pair{kGiB, "GiB"}
                            : value >= kMiB ? std::pair{kMiB, "MiB"}
                            : value >= kKiB ? std::pair{kKiB, "KiB"}
                                            : std::pair{1.0, "B"};
  if (unit == 1.0) return fmt::format("{} B", bytes);
  // Three significant digits: a peak just over the budget still reads as
  // larger ("6.83 GiB" against "6.75 GiB").
  const double scaled = value / unit;
  const int decimals = scaled < 10 ? 2 : scaled < 100 ? 1 : 0;
  return fmt::format("{:.{}f} {}", scaled, decimals, name);
}

}  // namespace memwall::report
