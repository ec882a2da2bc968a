#include "memwall/base/parse_values.h"

#include <charconv>
#include <utility>

#include "memwall/base/error.h"

namespace memwall {

int64_t parse_count(const std::string& text, const char* flag) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc::result_out_of_range) fail("{} {} is too large", flag, text);
  if (ec != std::errc() || ptr != end || text.empty()) {
    fail("{} must be a positive integer (got '{}')", flag, text);
  }
  if (value <= 0) fail("{} must be a positive integer (got {})", flag, value);
  return value;
}

uint64_t parse_bytes(const std::string& text, const char* flag, uint64_t reference) {
  return parse_size(text, flag, reference, text, "42949672960, 40GiB or 80%");
}

uint64_t parse_size(std::string_view text, const char* flag, uint64_t reference,
                    std::string_view shown, std::string_view examples) {
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"KiB", 0x1p10}, {"MiB", 0x1p20}, {"GiB", 0x1p30}, {"TiB", 0x1p40}, {"PiB", 0x1p50},
      {"EiB", 0x1p60}, {"KB", 1e3},     {"MB", 1e6},     {"GB", 1e9},     {"TB", 1e12},
      {"PB", 1e15},    {"EB", 1e18},    {"%", 0},        {"B", 1}};
  std::string_view number = text;
  double scale = 1;
  bool percent = false;
  for (const auto& [unit, factor] : kUnits) {
    if (number.size() > unit.size() && number.ends_with(unit)) {
      number.remove_suffix(unit.size());
      scale = factor;
      percent = unit == "%";
      break;
    }
  }
  while (!number.empty() && number.back() == ' ') number.remove_suffix(1);
  if (scale == 1 && !number.empty() &&
      number.find_first_not_of("0123456789") == std::string_view::npos) {
    uint64_t exact = 0;  // plain bytes: exact beyond 2^53 too
    const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), exact);
    if (ec == std::errc() && ptr == number.data() + number.size() && exact > 0 &&
        exact <= kMaxBytes) {
      return exact;
    }
  }
  double value = 0;
  const char* end = number.data() + number.size();
  auto [ptr, ec] = std::from_chars(number.data(), end, value);
  if (ec != std::errc() || ptr != end || number.empty() || !(value > 0) ||
      number.find_first_not_of("0123456789.") != std::string_view::npos) {
    fail("{} must be a positive size such as {} (got '{}')", flag, examples, shown);
  }
  const double bytes = percent ? value / 100 * static_cast<double>(reference) : value * scale;
  if (!(bytes < 0x1p62)) fail("{} {} is above the limit of 2^62 bytes", flag, shown);
  if (bytes < 1) fail("{} {} is less than one byte", flag, shown);
  return static_cast<uint64_t>(bytes);
}

double checked_time_limit(double seconds) {
  if (!(seconds > 0) || seconds > 86400) {
    fail("--time-limit must be a number of seconds in (0, 86400] (got {})", seconds);
  }
  return seconds;
}

}  // namespace memwall
