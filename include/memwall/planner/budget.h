// `--budget` (memwall plan, simulate, run): bytes, or a share of one of two
// references spelled out (Note [Budget shares] in src/planner/budget.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "memwall/graph/types.h"
#include "memwall/hw/hardware.h"

namespace memwall {

// What --budget's help says of its forms, for every verb's help text.
inline constexpr const char* kBudgetForms =
    "bytes (42949672960, 40GiB), N%gpu (N% of the GPU profile's device memory) or N%peak (N% "
    "of the keep-all plan's peak); a bare N% is refused";

// The keep-all plan's device peak: the default plan of `graph` (every op
// once, each buffer freed after its last use) simulated on `hw` without a
// budget, as `memwall plan --strategy remat:keep-all` reports it.
uint64_t keep_all_peak(const Graph& graph, const Hardware& hw);

// The bytes --budget `text` means on `hw` for a graph whose keep-all peak
// `peak` gives (called only for N%peak and for the message of a bare N%).
// Throws Error, naming --budget, for malformed text, zero, sizes above
// 2^62 bytes, and a bare N% (the line names both spellings in bytes).
uint64_t parse_budget(const std::string& text, const Hardware& hw,
                      const std::function<uint64_t()>& peak);

// parse_budget where the keep-all peak is not known (`memwall run` before
// it traces; the capacity searches, whose model changes): the same checks,
// the bytes except for N%peak (nullopt), and a bare N%'s line saying of the
// peak `why_unknown`.
std::optional<uint64_t> budget_before_peak(const std::string& text, const Hardware& hw,
                                           std::string_view why_unknown);

// A planning budget (`memwall plan`, the Python package's plan) is at most
// the device: throws Error naming --budget otherwise.
void check_budget_within_device(uint64_t budget, const Hardware& hw);

// Whether `text` is a share of the keep-all peak (N%peak).
bool budget_of_peak(const std::string& text);

}  // namespace memwall
