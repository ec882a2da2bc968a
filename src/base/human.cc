// Numbers as people read them (human.h).
#include "memwall/base/human.h"

#include <fmt/format.h>

namespace memwall {

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

}  // namespace memwall
