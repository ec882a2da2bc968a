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
#include "budget.h"

#include <charconv>
#include <optional>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "format.h"
#include "memwall/graph/error.h"
#include "options.h"
#include "remat_runner.h"

namespace memwall::cli {
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

// N of "N%" when it is a positive number as parse_size reads one.
std::optional<double> percent_value(std::string_view percent) {
  const std::string_view n = percent.substr(0, percent.size() - 1);
  double value = 0;
  const auto [ptr, ec] = std::from_chars(n.data(), n.data() + n.size(), value);
  if (n.empty() || ec != std::errc() || ptr != n.data() + n.size() || !(value > 0) ||
      n.find_first_not_of("0123456789.") != std::string_view::npos) {
    return std::nullopt;
  }
  return value;
}

// The shares' forms checked without their reference: one line for a
// malformed number, as parse_size gives it.
double checked_percent(std::string_view percent, std::string_view text) {
  const std::optional<double> value = percent_value(percent);
  if (!value) fail("--budget must be a positive size such as {} (got '{}')", kExamples, text);
  return *value;
}

// "19,327,352,832 B (80% of l4's device memory, 24.00 GiB)": `text` of
// `reference`, which `what` names.
std::string share_of(std::string_view text, uint64_t reference, std::string_view what) {
  const double bytes = checked_percent(text, text) / 100 * static_cast<double>(reference);
  return fmt::format("{} ({} of {}, {})",
                     bytes < 0x1p62 ? grouped(static_cast<uint64_t>(bytes)) + " B"
                                    : std::string("more than 2^62 bytes"),
                     text, what, human_bytes(reference));
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

uint64_t parse_budget(const std::string& text, const Hardware& hw,
                      const std::function<uint64_t()>& peak) {
  const Split s = split(text);
  switch (s.share) {
    case Share::kNone:
      return parse_size(text, "--budget", 0, text, kExamples);
    case Share::kGpu:
      return parse_size(s.percent, "--budget", hw.device_memory_bytes, text, kExamples);
    case Share::kPeak:
      return parse_size(s.percent, "--budget", peak(), text, kExamples);
    case Share::kBare:
      break;
  }
  refuse_bare(text, hw, share_of(text, peak(), "the keep-all plan's peak"));
}

void check_budget_text(const std::string& text, const Hardware& hw) {
  const Split s = split(text);
  switch (s.share) {
    case Share::kNone:
      (void)parse_size(text, "--budget", 0, text, kExamples);
      return;
    case Share::kGpu:
      (void)parse_size(s.percent, "--budget", hw.device_memory_bytes, text, kExamples);
      return;
    case Share::kPeak:
      (void)checked_percent(s.percent, text);  // its bytes wait for the peak
      return;
    case Share::kBare:
      break;
  }
  (void)checked_percent(text, text);
  refuse_bare(text, hw,
              fmt::format("{} of the keep-all plan's peak (the traced model's, known once it is "
                          "traced)",
                          text));
}

bool budget_of_peak(const std::string& text) { return split(text).share == Share::kPeak; }

}  // namespace memwall::cli
