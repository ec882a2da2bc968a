// Values people type: counts, memory sizes and time limits, parsed strictly.
// Each parser names the option (`flag`) in its one-line error, so that the
// command line and the Python package say the same thing of the same typo.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace memwall {

// A positive integer; throws Error naming `flag` otherwise (a value beyond
// int64 is "too large", never saturated: a typo must not become a huge batch).
int64_t parse_count(const std::string& text, const char* flag);

// A memory size: plain bytes ("42949672960"), a decimal number with a unit
// (KiB, MiB, GiB, TiB, PiB, EiB; KB, MB, GB, TB, PB, EB in powers of ten), or
// a percentage of `reference` bytes ("80%"). Throws Error naming `flag` for
// anything else, for zero, and for sizes above 2^62 bytes (kMaxBytes).
uint64_t parse_bytes(const std::string& text, const char* flag, uint64_t reference);
// parse_bytes of `text`, its messages showing `shown` and the forms
// `examples` names (--budget's: memwall/planner/budget.h).
uint64_t parse_size(std::string_view text, const char* flag, uint64_t reference,
                    std::string_view shown, std::string_view examples);

// A time limit in seconds, within (0, 86400]; throws Error otherwise.
double checked_time_limit(double seconds);

}  // namespace memwall
