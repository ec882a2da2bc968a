// Pieces of JSON text for the trace writer: strings and microsecond times.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace memwall::report {

// Appends `text` as a JSON string literal. Invalid UTF-8 becomes U+FFFD
// rather than an exception: names come from arbitrary graph files.
void append_json_string(std::string& out, std::string_view text);

// Seconds to whole nanoseconds (the resolution Perfetto keeps); non-finite
// values become 0 and huge ones saturate, so the text is always valid JSON.
int64_t to_nanos(double seconds);

// Appends nanoseconds as a decimal count of microseconds ("1500", "2.25"):
// exact, and spans that touch in seconds still touch in the trace.
void append_micros(std::string& out, int64_t nanos);

}  // namespace memwall::report
