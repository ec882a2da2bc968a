// --budget's forms (budget.h).
//
// Note [Budget shares]
// ~~~~~~~~~~~~~~~~~~~~
// A budget given as a share needs a reference, and two are natural: the
// GPU's memory (what auto and the swap/offload techniques plan within) and
// the keep-all plan's peak (what rematerialization saves from). A bare
// `80%` used to mean the first in `memwall plan` with auto and the single
// techniques and the second with the remat strategies, `simulate` and
// `run` (issue 45): the same text asked for 64 GiB or 5 GiB depending on
// --strategy. Every verb now takes both, spelled out: `N%gpu` is N% of the
// hardware profile's device memory, `N%peak` N% of the keep-all plan's
// peak (the graph on one device, every op computed once, each buffer freed
// after its last use, nothing recomputed, swapped or offloaded, as the
// simulator counts it). A bare `N%` is refused with both spellings and the
// bytes each would give.
#include "memwall/planner/budget.h"

#include <optional>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "memwall/base/error.h"
#include "memwall/base/human.h"
#include "memwall/base/parse_values.h"
#include "memwall/remat/runner.h"

namespace memwall {
namespace {

constexpr std::string_view kExamples = "42949672960, 40GiB, 80%gpu or 80%peak";

enum class Share { kNone, kGpu, kPeak, kBare };

struct Split {
  std::string_view percent;  // "80%" of "80%gpu"; the whole text without a share
  Share share = Share::kNone;
};

Split split(std::string_view text) {
  for (const auto& [suffix, share] :
       {std::pair<std::string_view, Share>{"%gpu", Share::kGpu}, {"%peak", Share::kPeak}}) {
    if (text.ends_with(suffix)) {
      return {text.substr(0, text.size() - suffix.size() + 1), share};
    }
  }
  return {text, text.ends_with('%') ? Share::kBare : Share::kNone};
}

// "19,327,352,832 B (80% of l4's device memory, 24.00 GiB)": `text` of
// `reference`, which `what` names.
std::string share_of(std::string_view text, uint64_t reference, std::string_view what) {
  const uint64_t bytes = parse_size(text, "--budget", reference, text, kExamples);
  return fmt::format("{} B ({} of {}, {})", grouped(bytes), text, what, human_bytes(reference));
}

// The line for a bare N%: both spellings, with what each means in bytes
// (`peak`: the second's figure).
[[noreturn]] void refuse_bare(std::string_view text, const Hardware& hw, const std::string& peak) {
  const std::string_view n = text.substr(0, text.size() - 1);
  fail("--budget {} is ambiguous: write {}%gpu for {} or {}%peak for {}", text, n,
       share_of(text, hw.device_memory_bytes, hw.name + "'s device memory"), n, peak);
}

}  // namespace

uint64_t keep_all_peak(const Graph& graph, const Hardware& hw) {
  return device_peak(keep_all_simulation(graph, hw));
}

namespace {

// The one reading of --budget: `peak` null when the keep-all peak is not
// known where it is read (`why_unknown` says why), and then N%peak's bytes
// are not either.
std::optional<uint64_t> budget_bytes(const std::string& text, const Hardware& hw,
                                     const std::function<uint64_t()>* peak,
                                     std::string_view why_unknown) {
  const Split s = split(text);
  switch (s.share) {
    case Share::kNone:
      return parse_size(text, "--budget", 0, text, kExamples);
    case Share::kGpu:
      return parse_size(s.percent, "--budget", hw.device_memory_bytes, text, kExamples);
    case Share::kPeak:
      if (peak == nullptr) {
        // Its bytes wait for the peak; the number is checked now.
        (void)parse_size(s.percent, "--budget", hw.device_memory_bytes, text, kExamples);
        return std::nullopt;
      }
      return parse_size(s.percent, "--budget", (*peak)(), text, kExamples);
    case Share::kBare:
      break;
  }
  refuse_bare(text, hw,
              peak != nullptr
                  ? share_of(text, (*peak)(), "the keep-all plan's peak")
                  : fmt::format("{} of the keep-all plan's peak ({})", text, why_unknown));
}

}  // namespace

uint64_t parse_budget(const std::string& text, const Hardware& hw,
                      const std::function<uint64_t()>& peak) {
  return *budget_bytes(text, hw, &peak, {});
}

std::optional<uint64_t> budget_before_peak(const std::string& text, const Hardware& hw,
                                           std::string_view why_unknown) {
  return budget_bytes(text, hw, nullptr, why_unknown);
}

void check_budget_within_device(uint64_t budget, const Hardware& hw) {
  if (budget > hw.device_memory_bytes) {
    fail("--budget {} is more than the GPU's {} bytes", budget, hw.device_memory_bytes);
  }
}

bool budget_of_peak(const std::string& text) { return split(text).share == Share::kPeak; }

}  // namespace memwall
