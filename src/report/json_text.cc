#include "json_text.h"

#include <algorithm>
#include <cmath>

#include "append.h"

namespace memwall::report {

int64_t to_nanos(double seconds) {
  if (!std::isfinite(seconds)) return 0;
  constexpr double kLimit = 9.0e18;  // below INT64_MAX, so the cast is defined
  return static_cast<int64_t>(std::clamp(std::round(seconds * 1e9), -kLimit, kLimit));
}

void append_micros(std::string& out, int64_t nanos) {
  if (nanos < 0) {
    out += '-';
    nanos = -nanos;  // |nanos| <= 9e18 (to_nanos), no overflow
  }
  const int64_t whole = nanos / 1000;
  int64_t frac = nanos % 1000;
  if (frac == 0) {
    append(out, "{}", whole);
    return;
  }
  int digits = 3;
  while (frac % 10 == 0) {
    frac /= 10;
    --digits;
  }
  append(out, "{}.{:0{}}", whole, frac, digits);
}

}  // namespace memwall::report
