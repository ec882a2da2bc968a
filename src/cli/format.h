// Human-readable formatting shared by the verbs.
#pragma once

#include <cstdint>
#include <string>

namespace memwall::cli {

// "12.55 GiB" (binary units, 2 decimals; plain bytes below 1 KiB).
std::string human_bytes(uint64_t bytes);
// "1,234,567".
std::string grouped(uint64_t value);
// "1.23 s", "45.6 ms", "789 us".
std::string human_seconds(double seconds);

}  // namespace memwall::cli
