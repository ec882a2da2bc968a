// Pieces of JSON text for the trace writer: microsecond times (strings:
// memwall/base/json_string.h).
#pragma once

#include <cstdint>
#include <string>

namespace memwall::report {

// Seconds to whole nanoseconds (the resolution Perfetto keeps); non-finite
// values become 0 and huge ones saturate, so the text is always valid JSON.
int64_t to_nanos(double seconds);

// Appends nanoseconds as a decimal count of microseconds ("1500", "2.25"):
// exact, and spans that touch in seconds still touch in the trace.
void append_micros(std::string& out, int64_t nanos);

}  // namespace memwall::report
