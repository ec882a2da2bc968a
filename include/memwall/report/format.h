// Human-readable formatting shared by the verbs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "memwall/hw/hardware.h"

namespace memwall::cli {

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
// The `ranks` row of a plan or simulation of several data-parallel ranks:
// how many nodes they fill and which figures are per rank.
std::string ranks_row(const Hardware& hw, int ranks);
// One row of a verb's table: "  label<padded to `width`>value\n".
std::string field(std::string_view label, std::string_view value, int width = 24);

}  // namespace memwall::cli
