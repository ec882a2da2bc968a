// Numbers as people read them, in tables and in one-line errors: bytes,
// counts, seconds and FLOPs. Below every module that writes text for a
// person (the planner's "does not run" errors and layout rows, report's
// tables, the command line), so that each says a size the same way.
#pragma once

#include <cstdint>
#include <string>

namespace memwall {

// "12.55 GiB" (binary units, 2 decimals; plain bytes below 1 KiB).
std::string human_bytes(uint64_t bytes);
// "1,234,567".
std::string grouped(uint64_t value);
// "1.23 s", "45.6 ms", "789 us".
std::string human_seconds(double seconds);
// "1,234,567 B (1.18 MiB)": exact bytes, then human_bytes.
std::string exact_bytes(uint64_t bytes);
// "12.3 GFLOP", "4.56 TFLOP" (powers of ten).
std::string human_flops(double flops);

}  // namespace memwall
